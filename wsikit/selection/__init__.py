"""From per-patch features to the regions worth showing: attention, selectors, crops.

:mod:`wsikit.selection.attention` scores every patch (TITAN, or the weight-free importance
of :mod:`wsikit.models.importance`; one result type), :mod:`wsikit.selection.selectors`
chooses multi-scale windows from the scores, and :mod:`wsikit.selection.crops` reads the
chosen windows as crops. (Named ``selection``, not ``select``: :func:`wsikit.select` is the
command's function.)
"""
