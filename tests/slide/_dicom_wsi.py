"""A small writer of DICOM VL Whole Slide Microscopy images (TILED_FULL), for tests.

Written from the DICOM standard (PS3.3 A.32.8, VL Whole Slide Microscopy Image IOD) with
pydicom: one instance (file) per pyramid level, all in one series, pixel spacing in mm in the
shared functional groups. Frames are raw RGB (Explicit VR Little Endian) by default, so a read
can be compared pixel for pixel with the image written, or baseline JPEG (``codec="jpeg"``),
as scanners store them.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

VL_WSI = "1.2.840.10008.5.1.4.1.1.77.1.6"


def _code(value: str, scheme: str, meaning: str):
    from pydicom.dataset import Dataset

    ds = Dataset()
    ds.CodeValue, ds.CodingSchemeDesignator, ds.CodeMeaning = value, scheme, meaning
    return ds


def _frames(level: np.ndarray, tile: int) -> list[np.ndarray]:
    """Row-major tiles of ``level``, edge tiles padded white to ``tile``×``tile``."""
    h, w = level.shape[:2]
    out = []
    for y in range(0, h, tile):
        for x in range(0, w, tile):
            t = np.full((tile, tile, 3), 255, np.uint8)
            part = level[y:y + tile, x:x + tile]
            t[:part.shape[0], :part.shape[1]] = part
            out.append(t)
    return out


def write_dicom_wsi(folder: str | Path, image: np.ndarray, *, mpp: float, tile: int = 256,
                    downsamples: tuple[int, ...] = (1, 2, 4), codec: str = "raw") -> list[Path]:
    """Write ``image`` (level 0, ``(H, W, 3) uint8`` at ``mpp`` µm/px) as a DICOM WSI series.

    Each downsample becomes one file ``level_<i>.dcm`` in ``folder``; downsampled levels are
    box-filtered from level 0 (PIL ``reduce``). Returns the files written.
    """
    from pydicom.dataset import Dataset, FileMetaDataset
    from pydicom.encaps import encapsulate
    from pydicom.uid import ExplicitVRLittleEndian, JPEGBaseline8Bit, generate_uid

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    study, series, frame_ref = generate_uid(), generate_uid(), generate_uid()
    dim_uid = generate_uid()
    paths = []
    base = Image.fromarray(image)
    for i, ds_factor in enumerate(downsamples):
        level = np.asarray(base if ds_factor == 1 else base.reduce(ds_factor))
        h, w = level.shape[:2]
        frames = _frames(level, tile)
        ds = Dataset()
        meta = FileMetaDataset()
        meta.MediaStorageSOPClassUID = VL_WSI
        meta.MediaStorageSOPInstanceUID = sop = generate_uid()
        meta.TransferSyntaxUID = JPEGBaseline8Bit if codec == "jpeg" else ExplicitVRLittleEndian
        ds.file_meta = meta
        ds.SOPClassUID, ds.SOPInstanceUID = VL_WSI, sop
        ds.StudyInstanceUID, ds.SeriesInstanceUID = study, series
        ds.FrameOfReferenceUID = frame_ref
        ds.Modality, ds.SeriesNumber, ds.InstanceNumber = "SM", 1, i + 1
        ds.PatientName, ds.PatientID, ds.StudyID = "Test^Slide", "wsikit-test", "1"
        ds.Manufacturer, ds.ContainerIdentifier = "wsikit tests", "SLIDE-1"
        ds.ImageType = (["ORIGINAL", "PRIMARY", "VOLUME", "NONE"] if ds_factor == 1
                        else ["DERIVED", "PRIMARY", "VOLUME", "RESAMPLED"])
        ds.SamplesPerPixel, ds.PlanarConfiguration = 3, 0
        ds.PhotometricInterpretation = "YBR_FULL_422" if codec == "jpeg" else "RGB"
        ds.BitsAllocated, ds.BitsStored, ds.HighBit, ds.PixelRepresentation = 8, 8, 7, 0
        ds.Rows = ds.Columns = tile
        ds.NumberOfFrames = len(frames)
        ds.TotalPixelMatrixColumns, ds.TotalPixelMatrixRows = w, h
        ds.TotalPixelMatrixFocalPlanes = ds.NumberOfFocalPlanes = 1
        ds.NumberOfOpticalPaths = 1
        ds.DimensionOrganizationType = "TILED_FULL"
        dim = Dataset()
        dim.DimensionOrganizationUID = dim_uid
        ds.DimensionOrganizationSequence = [dim]
        spacing_mm = mpp * ds_factor / 1000.0
        ds.ImagedVolumeWidth = w * spacing_mm
        ds.ImagedVolumeHeight = h * spacing_mm
        ds.ImagedVolumeDepth = 0.001
        measures = Dataset()
        measures.PixelSpacing = [spacing_mm, spacing_mm]
        measures.SliceThickness = 0.001
        shared = Dataset()
        shared.PixelMeasuresSequence = [measures]
        ds.SharedFunctionalGroupsSequence = [shared]
        origin = Dataset()
        origin.XOffsetInSlideCoordinateSystem = 20.0
        origin.YOffsetInSlideCoordinateSystem = 40.0
        ds.TotalPixelMatrixOriginSequence = [origin]
        path_ds = Dataset()
        path_ds.OpticalPathIdentifier = "1"
        path_ds.IlluminationColorCodeSequence = [_code("414298005", "SCT", "Full Spectrum")]
        path_ds.IlluminationTypeCodeSequence = [_code("111744", "DCM", "Brightfield illumination")]
        ds.OpticalPathSequence = [path_ds]
        ds.SpecimenDescriptionSequence = []
        if codec == "jpeg":
            encoded = []
            for t in frames:
                buf = io.BytesIO()
                Image.fromarray(t).save(buf, format="JPEG", quality=95)
                encoded.append(buf.getvalue())
            ds.PixelData = encapsulate(encoded)
            ds["PixelData"].VR = "OB"
            ds.LossyImageCompression = "01"
        else:
            ds.PixelData = np.stack(frames).tobytes()
        out = folder / f"level_{i}.dcm"
        ds.save_as(out, enforce_file_format=True)
        paths.append(out)
    return paths
