"""Image data sets: classification, generation, captioning, OCR."""
