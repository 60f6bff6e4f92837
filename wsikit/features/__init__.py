"""Batched patch-feature extraction and the feature files and store.

:mod:`wsikit.features.extract`: a slide's grid through an encoder, in batches, with the
weight-free importance's measures taken from the same pixels
(:func:`~wsikit.features.extract.extract_features`, :class:`~wsikit.features.extract.
Embeddings`); :mod:`wsikit.features.store`: the optional zarr feature store of a cohort.
"""
