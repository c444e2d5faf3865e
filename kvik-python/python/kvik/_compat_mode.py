"""``kvik.CompatMode``: KvikIO's switch between cuFile and the POSIX path."""

import enum


class CompatMode(enum.IntEnum):
    """Whether device memory goes through cuFile (values as in KvikIO).

    - ``ON``: never cuFile; POSIX (through pinned bounce buffers for device memory).
    - ``OFF``: always cuFile (also cuFile's own compatibility mode); a failure is an error.
    - ``AUTO``: cuFile where it has a direct path (nvidia-fs, PCI P2PDMA), POSIX elsewhere,
      with the reason in every path report. KvikIO's AUTO uses cuFile whenever libcufile
      loads, even where cuFile would only run its slower compatibility mode.
    """

    OFF = 0
    ON = 1
    AUTO = 2
