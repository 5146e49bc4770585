"""The triton battery of tests/ml/ml.py, in .venv-ml-cuda (torch 2.14.1's CUDA build and the triton
it pulls), on a machine without a GPU: `import triton`, a kernel defined (not launched), the CUDA
build's CPU operations, and a torch C++ error caught. Each test checks its own result; ml.py
compares the outcomes with the bare run's.
"""
import pytest
import torch


def test_import_triton():
    import triton
    import triton.language as tl

    assert triton.__version__.count(".") >= 1
    assert hasattr(tl, "program_id")


def test_define_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        pid = tl.program_id(axis=0)
        offs = pid * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask),
                 mask=mask)

    assert isinstance(add_kernel, triton.runtime.JITFunction)
    assert "tl.program_id" in add_kernel.src


def test_no_gpu_here():
    assert torch.version.cuda is not None      # the CUDA build
    assert not torch.cuda.is_available()       # and no device on this machine
    assert torch.cuda.device_count() == 0


def test_cpu_operations():
    torch.manual_seed(0)
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    assert (a @ a.T).tolist() == [[14.0, 38.0, 62.0], [38.0, 126.0, 214.0], [62.0, 214.0, 366.0]]
    model = torch.nn.Linear(4, 2)
    out = model(a)
    out.sum().backward()
    assert model.weight.grad.tolist() == [[12.0, 15.0, 18.0, 21.0]] * 2


def test_cpp_error_caught():
    with pytest.raises(RuntimeError, match=r"shape '\[3\]' is invalid for input of size 2"):
        torch.zeros(2).view(3)
    with pytest.raises(IndexError):
        torch.arange(3)[5]


def test_cuda_call_without_gpu():
    """Asking the CUDA build for a device it lacks raises from C++, caught."""
    with pytest.raises((RuntimeError, AssertionError)):
        torch.zeros(2, device="cuda")
