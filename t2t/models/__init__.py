"""Models: T2TModel and the catalogue of registered models."""
