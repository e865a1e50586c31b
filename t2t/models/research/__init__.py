"""Research models: registered and tested, with no regression guarantee; a model graduates to t2t/models/ by getting a regression case."""
