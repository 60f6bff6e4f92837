"""Weight-free tissue mask and artefact masks (ink, folds, debris, scanner fill).

:mod:`wsikit.tissue.mask` segments (:func:`~wsikit.tissue.mask.segment_tissue`),
:mod:`wsikit.tissue.stain` holds the colour deconvolution and ink measures it uses,
:mod:`wsikit.tissue.constants` its defaults, and :mod:`wsikit.tissue.geojson` reads the
GeoJSON polygons (QuPath) a mask is made from or saved as.
"""
