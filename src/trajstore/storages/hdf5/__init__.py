"""``HDF5Storage``: leaves as chunked datasets of one ``data.h5`` (see :mod:`.storage` for the format,
crashes and damaged files).

Modules, one job each:

- :mod:`.storage`: the storage class (the :class:`~trajstore.storages.SpaceStorage` contract).
- :mod:`._layout`: file names, format bounds, dataset names, dtypes, chunking.
- :mod:`._rows`: the read strategy and the block write (h5py's low-level calls).
- :mod:`._files`: opening the file so that damage fails fast; damage met by a write.
- :mod:`._handles`: a reader and a writer of one file in one process; forks.
- :mod:`._rewrite`, :mod:`._recovery`: compaction, conversion of the old format, crashed writers.
"""

from trajstore.storages.hdf5._layout import (CHUNK_BYTES, CHUNK_MAX_ROWS, COMPRESSED_CACHE_BYTES, COMPRESSIONS,
                                             DATA_FILE, LOCKING, MAX_CHUNK_BYTES, PLAIN_LIBVER, ROOT_DATASET,
                                             SWMR_LIBVER, TEMP_FILE)
from trajstore.storages.hdf5._rewrite import COMPACT_SLACK
from trajstore.storages.hdf5._rows import COVER_MAX_BYTES, COVER_WASTE_PER_ROW, INDEX_LIST_MAX_ROW_BYTES, read_rows
from trajstore.storages.hdf5.storage import HDF5Storage

__all__ = ["HDF5Storage", "DATA_FILE", "TEMP_FILE", "ROOT_DATASET", "SWMR_LIBVER", "PLAIN_LIBVER", "LOCKING",
           "COMPRESSIONS", "CHUNK_BYTES", "CHUNK_MAX_ROWS", "MAX_CHUNK_BYTES", "COMPRESSED_CACHE_BYTES",
           "COMPACT_SLACK", "COVER_WASTE_PER_ROW", "COVER_MAX_BYTES", "INDEX_LIST_MAX_ROW_BYTES", "read_rows"]
