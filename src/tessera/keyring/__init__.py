"""Re-seal stored secrets under the active key, so that an old key can leave the key ring.

Rotation: put a new key first in ``TESSERA_SECRET_KEYS`` (keep the old ones after it), restart,
run ``tessera secrets rotate``, then drop the old keys. Sealed values are opened with the key
whose id they carry and sealed again with the active key, with the same associated data.

``service``: the re-sealing, and a secret opened with the associated data of its row (which a
backup's verification uses too); ``schemas``: what re-sealing reports; ``repository``: the
statements of both.
"""
