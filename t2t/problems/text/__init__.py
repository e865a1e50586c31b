"""Text data sets: language modelling, classification, summarization, offline sentences."""
