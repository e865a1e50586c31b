"""Speech data sets: LibriSpeech and speech synthesized offline with espeak-ng."""
