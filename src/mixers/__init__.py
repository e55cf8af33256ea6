"""Mixers: the token mixers and channel mixers of sequence models, one module per idea.

``mixers.attention``, ``mixers.feed_forward``, ``mixers.positions``, ``mixers.model``,
``mixers.data``, ``mixers.train``, ``mixers.plot`` and ``mixers.experiments``.
"""

__version__ = "0.1.0"
