"""Problems: data sets with their download, preprocessing, vocabulary and pipeline.

Every module in this package is imported when the registry first lists or looks up a
problem, so a new problem is one new file with one decorated class.
"""
