"""The suites tests/ml/ml.py runs: the ML stack's own tests, as their wheels install them, and the
batteries in this directory.

Each suite names its venv (`ml`: .venv-ml, requirements-ml.txt; `cuda`: .venv-ml-cuda,
requirements-ml-cuda.txt), its tests (paths under the venv's site-packages, or `here:` for this
directory), extra pytest arguments, and its stage: MEMSHIM_STAGES for the `stage` and `exact` modes,
one stage `s` whose targets are functions the tests reach (a Python function of the package; a
native one too where the library exports it), and MEMSHIM_SITES=exact:s in the `exact` mode.

`fast` and `full`: whether `make check-ml` (the fast set) and `make check-ml-full` run the suite
({}: all of it; None: not at all; `full` is all of it when not given). The fast set has suites of
its own, one pytest run per package family (each run pays the imports and the collection once),
chosen for the C++ exceptions they throw (among them the three tests that aborted the process
before the wrappers found each caller's own unwinder) and for time: 4 CPU minutes in all four modes (6 minutes of wall time on
2 cores shared with a load of 9). The full set runs each package's suites whole, one run each.
"""

NOT_SLOW = ["-m", "not slow and not xslow"]
PANDAS_MARKS = ["-m", "not slow and not network and not db and not single_cpu"]

SUITES = [
    # --- the fast set (make check-ml): one pytest run per package family, what throws most ------
    dict(name="torch-battery-fast", venv="ml", paths=["here:test_torch_battery.py"],
         # torch.compile's first compile (25-50 s) and the spawn workers' error test, and the
         # native target (every allocation of torch's then looks at the stack: 2x), are in the
         # full set
         args=["-k", "not compile and not (worker_error and spawn)"],
         stage="s=torch.nn.modules.module:Module._call_impl", fast={}, full=None, timeout=600),
    dict(name="pyarrow-fast", venv="ml",
         # test_byte_stream_split: a ParquetException thrown and caught in libparquet (it
         # aborted the process before the wrappers found each caller's own unwinder); casts and string kernels: ArrowInvalid
         paths=["pyarrow/tests/test_compute.py", "pyarrow/tests/parquet/test_basic.py"],
         args=["-k", "cast or utf8 or strptime or strftime or ascii or test_basic"],
         stage="s=pyarrow.compute:_make_generic_wrapper.<locals>.wrapper"
               "|pyarrow.parquet.core:write_table|libarrow.so:arrow::compute::CallFunction",
         fast={}, full=None, timeout=600),
    dict(name="scipy-fast", venv="ml",
         # TestCephes.test_nctdtr: a Boost.Math error thrown and caught in a ufunc (aborted before
         # the fix); sparse construction and CSR/COO kernels; LAPACK's Cholesky
         paths=["scipy/special/tests/test_basic.py::TestCephes",
                "scipy/sparse/tests/test_construct.py", "scipy/sparse/tests/test_coo.py",
                "scipy/linalg/tests/test_decomp_cholesky.py"], args=NOT_SLOW,
         stage="s=scipy.sparse._base:_spbase.__init__|scipy.linalg._decomp_cholesky:_cholesky",
         fast={}, full=None, timeout=600),
    dict(name="pandas-fast", venv="ml", paths=["pandas/tests/arrays/string_"], args=PANDAS_MARKS,
         stage="s=pandas.core.arrays.arrow.array:ArrowExtensionArray.__init__",
         fast={}, full=None, timeout=600),
    dict(name="sklearn-numpy-fast", venv="ml",
         paths=["sklearn/preprocessing/tests/test_encoders.py",
                "numpy/linalg/tests/test_linalg.py::TestCholesky",
                "numpy/linalg/tests/test_linalg.py::TestQR"],
         stage="s=sklearn.utils.validation:check_array", fast={}, full=None, timeout=600),

    # --- the batteries --------------------------------------------------------------------------
    dict(name="torch-battery", venv="ml", paths=["here:test_torch_battery.py"],
         # Module.__call__ runs in every DataLoader-less model call; at::native::view throws the
         # view errors the battery catches (libtorch_cpu exports it)
         stage="s=torch.nn.modules.module:Module._call_impl|libtorch_cpu.so:at::native::view",
         fast=None, timeout=900),
    dict(name="jax-battery", venv="ml", paths=["here:test_jax_battery.py"],
         stage="s=jax._src.dispatch:apply_primitive", fast=None, timeout=600),
    dict(name="triton-battery", venv="cuda", paths=["here:test_triton_battery.py"],
         stage="s=torch.nn.modules.module:Module._call_impl|libtorch_cpu.so:at::native::view",
         fast=None, timeout=600),

    # --- pyarrow --------------------------------------------------------------------------------
    dict(name="pyarrow.compute", venv="ml", paths=["pyarrow/tests/test_compute.py"],
         # every pyarrow.compute function is this generated wrapper; CallFunction is libarrow's
         stage="s=pyarrow.compute:_make_generic_wrapper.<locals>.wrapper"
               "|libarrow.so:arrow::compute::CallFunction",
         fast=None, timeout=1200),
    dict(name="pyarrow.array", venv="ml", paths=["pyarrow/tests/test_array.py"],
         stage="s=pyarrow.compute:_make_generic_wrapper.<locals>.wrapper"
               "|libarrow.so:arrow::compute::CallFunction",
         fast=None, timeout=900),
    dict(name="pyarrow.parquet", venv="ml", paths=["pyarrow/tests/parquet"],
         stage="s=pyarrow.parquet.core:read_table|pyarrow.parquet.core:write_table",
         fast=None, timeout=1500),
    dict(name="pyarrow.dataset", venv="ml", paths=["pyarrow/tests/test_dataset.py"],
         stage="s=pyarrow.dataset:dataset|libarrow.so:arrow::compute::CallFunction",
         fast=None, timeout=1500),

    # --- scipy ----------------------------------------------------------------------------------
    dict(name="scipy.sparse", venv="ml", paths=["scipy/sparse/tests"], args=NOT_SLOW,
         stage="s=scipy.sparse._base:_spbase.__init__",
         fast=None, timeout=2400),
    dict(name="scipy.special", venv="ml", paths=["scipy/special/tests"], args=NOT_SLOW,
         stage="s=numpy.testing._private.utils:assert_allclose",
         fast=None, timeout=1800),
    dict(name="scipy.optimize", venv="ml", paths=["scipy/optimize/tests"], args=NOT_SLOW,
         stage="s=scipy.optimize._minimize:minimize|scipy.optimize._optimize:_prepare_scalar_function",
         fast=None, timeout=2400),
    dict(name="scipy.linalg", venv="ml", paths=["scipy/linalg/tests"], args=NOT_SLOW,
         stage="s=scipy.linalg._decomp_cholesky:_cholesky",
         fast=None, timeout=2400),

    # --- pandas ---------------------------------------------------------------------------------
    dict(name="pandas.arrow-strings", venv="ml",
         paths=["pandas/tests/arrays/string_", "pandas/tests/strings",
                "pandas/tests/extension/test_arrow.py"], args=PANDAS_MARKS,
         stage="s=pandas.core.arrays.arrow.array:ArrowExtensionArray.__init__"
               "|libarrow.so:arrow::compute::CallFunction",
         fast=None, timeout=2400),
    dict(name="pandas.groupby", venv="ml", paths=["pandas/tests/groupby"], args=PANDAS_MARKS,
         stage="s=pandas.core.groupby.groupby:GroupBy._cython_agg_general"
               "|pandas.core.groupby.ops:WrappedCythonOp.cython_operation",
         fast=None, timeout=2400),
    dict(name="pandas.io", venv="ml", paths=["pandas/tests/io"], args=PANDAS_MARKS,
         stage="s=pandas.core.frame:DataFrame.__init__", fast=None, timeout=3000),

    # --- scikit-learn ---------------------------------------------------------------------------
    dict(name="sklearn", venv="ml",
         paths=["sklearn/linear_model/tests", "sklearn/preprocessing/tests",
                "sklearn/ensemble/tests", "sklearn/model_selection/tests",
                "sklearn/utils/tests", "sklearn/decomposition/tests", "sklearn/cluster/tests"],
         stage="s=sklearn.utils.validation:check_array",
         fast=None, timeout=3000),

    # --- numpy ----------------------------------------------------------------------------------
    dict(name="numpy", venv="ml",
         paths=["numpy/_core/tests", "numpy/linalg/tests", "numpy/lib/tests",
                "numpy/random/tests", "numpy/fft/tests", "numpy/ma/tests"], args=NOT_SLOW,
         stage="s=numpy.testing._private.utils:assert_array_compare",
         fast=None, timeout=3000),
]
