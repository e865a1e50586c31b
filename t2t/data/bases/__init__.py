"""The kinds of problem data sets subclass: text, translation, image, speech."""
