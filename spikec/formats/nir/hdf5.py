"""A ``.nir`` file (HDF5) is checked before nir reads a value out of it: every array must live inside the file.

HDF5 can make a file read elsewhere: an external link (``/node/weight`` -> ``other.h5:/data``), a soft link, a
dataset whose storage is an external raw file (``/etc/passwd`` read as a "weight") or a virtual dataset mapping
other files. ``nir.read`` follows all of them. ``check_file`` refuses each by name with its node path, and refuses
what is not a regular file (a FIFO would block the open, a device would be read forever), before ``nir.read``
(``read``) opens it. Dropping such a file changes no NIR semantics: ``nir.write`` never writes one.
"""
import os
import stat
from pathlib import Path

import nir

from spikec.ir.errors import BadInput

REMEDY = "write the file with nir.write (it stores every array inside the file), or read it only if you trust it " \
         "and copy the data it points to into the file"


def _problem(name: str, link, group) -> str | None:
    import h5py
    if isinstance(link, h5py.ExternalLink):
        return f"node path '/{name}' is an external link to {link.filename}:{link.path}"
    if isinstance(link, h5py.SoftLink):
        return f"node path '/{name}' is a soft link to {link.path}"
    if not isinstance(link, h5py.HardLink):
        return f"node path '/{name}' is a {type(link).__name__}, not an object stored in the file"
    obj = group.get(name)
    if isinstance(obj, h5py.Dataset):
        if obj.is_virtual:
            return f"dataset '/{name}' is a virtual dataset (its data lives in other files)"
        if obj.external:
            return f"dataset '/{name}' stores its data in the external file {obj.external[0][0]!r}"
    return None


def check_file(path) -> None:
    """BadInput unless ``path`` is a regular file whose every link is a hard link into it and whose every dataset
    stores its data in it. A file h5py cannot open passes: ``nir.read`` names what is wrong with it."""
    p = Path(path)
    try:
        mode = os.stat(p).st_mode
    except OSError as e:
        raise BadInput(f"NIR file {str(p)!r} cannot be read: {e.strerror or e}",
                       remedy="give the path of a .nir file written by nir.write") from e
    if not stat.S_ISREG(mode):
        raise BadInput(f"NIR file {str(p)!r} is not a regular file", remedy="give the path of a .nir file")
    import h5py
    try:
        f = h5py.File(p, "r")
    except OSError:
        return
    with f:
        found = f.visititems_links(lambda name, link: _problem(name, link, f))
    if found:
        raise BadInput(f"NIR file {str(p)!r}: {found}; spikec reads only data stored inside the .nir file",
                       remedy=REMEDY)


def read(path, type_check: bool = True) -> nir.NIRGraph:
    """``nir.read`` of a file ``check_file`` accepts."""
    check_file(path)
    return nir.read(path, type_check=type_check)


# the nir versions whose files spikec writes (the target option ``nir_version``): nir 1.0.8 changed no stored field
# (it made input_type/output_type init-only and metadata keyword-only in the classes) and gzip-compresses every array
# dataset; nir 1.0.7 wrote them uncompressed. Both store the version as a variable-length UTF-8 string (1.0.8 names
# h5py.string_dtype(), 1.0.7 gets it from the str), and each reads the other's files to the same graph
# (tests/targets/nir/test_nir_versions.py runs the real nir 1.0.7, installed apart, on both layouts)
WRITE_VERSIONS = ("1.0.8", "1.0.7")


def write(path, graph: nir.NIRGraph, version: str = WRITE_VERSIONS[0]) -> None:
    """``graph`` to ``path`` as nir ``version`` writes it (BadInput for a version not in ``WRITE_VERSIONS``)."""
    if version not in WRITE_VERSIONS:
        raise BadInput(f"NIR version {version!r} cannot be written", where="NIR export",
                       remedy=f"use one of {', '.join(WRITE_VERSIONS)}")
    if version == "1.0.8":
        nir.write(path, graph)
        return
    import h5py
    nir.write(path, graph, compression=None)
    with h5py.File(path, "r+") as f:   # the version it records, as nir 1.0.7's write: create_dataset("version", data=...)
        del f["version"]
        f.create_dataset("version", data=version)
