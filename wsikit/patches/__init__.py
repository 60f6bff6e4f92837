"""Patch grids at an exact target µm/px, and their TRIDENT/CLAM-compatible HDF5 files.

:mod:`wsikit.patches.grid` makes the grid (:func:`~wsikit.patches.grid.make_grid`,
:class:`~wsikit.patches.grid.TileGrid`); :mod:`wsikit.patches.h5` writes and reads the HDF5
files of grids, features and attention the same safe way.
"""
