"""What a Loader saves, loads and proves: `LoaderState` (``state_dict``, ``load_state_dict``,
``verify_epoch``), the delivery bookkeeping it reads (`Deliveries`: what reached the training
loop, held batches, the step, the epoch's delivery digest), the fingerprint that refuses a resume
over other data (`fingerprint`, `check_resume`), and a mixture's weight changes
(`MixtureWeights`), by hand or on a schedule of steps (`MixtureSchedule`), and a resume by key
after the dataset changed (`DatasetChange`, from the saved dataset's `KeyList`). The Loader's
parts, kept apart from how batches are made. The state's optional parts (a mixture's weights
and schedule, a schedule of filters) are each saved and loaded by the part that owns them
(`SavedPart`), registered with the `LoaderState`."""

from ._dataset_change import ChangeRecord, DatasetChange
from ._deliveries import Deliveries
from ._fingerprint import DeliveryDigest, check_resume, check_state_parts, dataset_digest, fingerprint, require_parts, verify_deliveries
from ._key_list import KeyList, write_key_list
from ._loader_state import Batching, LoaderState
from ._mixture_schedule import MixtureSchedule
from ._mixture_weights import MixtureWeights
from ._saved_part import SavedPart

__all__ = [
    "Batching",
    "ChangeRecord",
    "DatasetChange",
    "Deliveries",
    "DeliveryDigest",
    "KeyList",
    "LoaderState",
    "MixtureSchedule",
    "MixtureWeights",
    "SavedPart",
    "check_resume",
    "check_state_parts",
    "dataset_digest",
    "fingerprint",
    "require_parts",
    "verify_deliveries",
    "write_key_list",
]
