"""The peers' own formats, read in place, without converting: MosaicML Streaming's MDS shards
(raw or compressed whole), LitData's optimized chunks, TFRecord files (plain or gzip), Hugging Face ``save_to_disk``
folders (Arrow files), locally (`PeerFormatStorage`) and
on object stores (`stoker.storage.remote`'s stores open them through `PeerDataset`); and Grain's
ArrayRecord files on local disk through Google's own reader (`ArrayRecordStorage`), and Lance
datasets through Lance's (`LanceStorage`).

A format's parser turns one file's raw bytes into where each sample's payload lies and its
label, with array operations and bounds checked before anything is followed (`_mds.py`,
`_tfrecord.py`); `RecordTable` joins the files and is saved in stoker's cache folder, so only a
dataset's first open reads its files through.
"""

from ._array_record import ARRAY_RECORD_SUFFIX, ArrayRecordStorage
from ._dataset import MAX_RAW_BYTES, PeerDataset, hf_dataset, indexed_dataset, litdata_dataset, mds_dataset, tfrecord_dataset
from ._detect import index_json_format, local_peer_dataset, peer_format
from ._fields import FieldChoice
from ._inflate import inflate
from ._lance import LanceStorage, is_lance_path
from ._mds import MdsLayout, parse_mds_index, scan_mds_shard
from ._records import FileRecords, RecordFile, RecordTable
from ._storage import PeerFormatStorage
from ._tfrecord import example_features, is_tfrecord_name, scan_tfrecord, tfrecord_records

__all__ = [
    "ARRAY_RECORD_SUFFIX",
    "ArrayRecordStorage",
    "MAX_RAW_BYTES",
    "FieldChoice",
    "FileRecords",
    "LanceStorage",
    "MdsLayout",
    "PeerDataset",
    "PeerFormatStorage",
    "RecordFile",
    "RecordTable",
    "example_features",
    "index_json_format",
    "inflate",
    "is_lance_path",
    "is_tfrecord_name",
    "local_peer_dataset",
    "hf_dataset",
    "indexed_dataset",
    "litdata_dataset",
    "mds_dataset",
    "parse_mds_index",
    "peer_format",
    "scan_mds_shard",
    "scan_tfrecord",
    "tfrecord_dataset",
    "tfrecord_records",
]
