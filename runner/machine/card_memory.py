"""What a CUDA card holds outside torch's allocator, and the errors that say a card (or the host) is full: plain
values and text, no torch, so a measuring process that needs them imports nothing more (the engines' shared
helpers pull pandas and scikit-learn, seconds on a small machine before anything is timed)."""
from __future__ import annotations

CUDA_RUNTIME_BYTES = 800 * 1024**2  # CUDA context + cuBLAS/cuDNN handles, outside torch's allocator: 787 MiB
# measured on an H200 (torch 2.11, CUDA 13; `make gpu-check`'s memory section)

# memory failures outside torch's allocator (library handles, workspaces) and the CPU allocator's own message
OOM_SIGNS = ("CUDNN_STATUS_NOT_SUPPORTED", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED",
             "DefaultCPUAllocator: can't allocate")


def is_oom(exc: BaseException) -> bool:
    text = str(exc)
    return (type(exc).__name__ == "OutOfMemoryError" or "out of memory" in text.lower()
            or any(sign in text for sign in OOM_SIGNS))
