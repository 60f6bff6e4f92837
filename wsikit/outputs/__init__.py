"""The output folder every stage writes into, and the rules for writing it.

Below the pipeline's stages, so each of them (features written with ``out=``, the feature
store, the figure index, the viewer, the runner) reads and writes the same folder the same
way:

- :mod:`wsikit.outputs.layout`: where every file lives (:class:`~wsikit.outputs.layout.
  OutputLayout`, the TRIDENT layout plus wsikit's own files);
- :mod:`wsikit.outputs.slide_outputs`: a slide's output name and its one lock;
- :mod:`wsikit.outputs.lockfile`: the lock files themselves (owner, heartbeat, staleness);
- :mod:`wsikit.outputs.cache_record`: checksums of cached files, so damage is recomputed;
- :mod:`wsikit.outputs.publish`: result folders published whole or not at all;
- :mod:`wsikit.outputs.overwrite`: the one check before writing a file the user names;
- :mod:`wsikit.outputs.paths`: portable paths inside JSON outputs;
- :mod:`wsikit.outputs.progress`: the progress bars a run draws on stderr while it works.
"""
