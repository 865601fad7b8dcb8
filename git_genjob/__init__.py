"""git-genjob: model calls as keyed, replayable, signed writes recorded in git."""

__version__ = "0.1.0"
