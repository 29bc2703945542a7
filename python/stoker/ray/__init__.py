"""Ray Data integration: `StokerDatasource` reads any stoker storage into a Ray dataset (read tasks
by index ranges; columns key, label, bytes or decoded images) for preprocessing at scale with
``map_batches``. Ray is an optional extra (``pip install 'stoker[ray]'``): nothing here imports
it until a datasource is made."""

from ._datasource import StokerDatasource

__all__ = ["StokerDatasource"]
