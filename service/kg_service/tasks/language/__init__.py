"""The byte-level Python-code language model: corpus, model, layers, training, pyfunc."""
