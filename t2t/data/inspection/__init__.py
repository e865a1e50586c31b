"""Reading prepared data back: statistics, overlap between splits, the problem catalog."""
