"""Options shared by the batch runs and the per-slide reference runs in the tests.

A module of its own (not conftest.py): every test folder's conftest.py is imported under the
one name ``conftest``, so ``from conftest import …`` picks another folder's file when pytest
collects several folders in one run.
"""

OPTIONS = dict(tissue_mpp=8.0, target_mpp=0.5, patch_px=256, min_tissue=0.1)
