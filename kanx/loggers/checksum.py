"""TFRecord's masked CRC-32C, the checksum of TensorBoard's event files
(kanx.loggers.tensorboard writes them; check_loggers loads it before any compute)."""

from __future__ import annotations


def load_masked_crc32c():
    """TFRecord's masked CRC-32C: google-crc32c's C code where installed (the tensorboard extra
    brings it), else tensorboard's own, in Python (about 0.2 ms an event: 0.1 s a row for a pack
    of 500, against 1 us)."""
    try:
        import google_crc32c
    except ImportError:
        from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

        return masked_crc32c

    def masked(data: bytes) -> int:
        crc = google_crc32c.value(data)
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    return masked
