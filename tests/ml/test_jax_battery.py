"""The jax battery of tests/ml/ml.py: jax with jaxlib on the CPU (XLA compiles every jitted
function in C++, and reports its errors by throwing C++ exceptions that the bindings turn into
Python ones). Each test checks its own result; ml.py compares the outcomes with the bare run's.
"""
import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import lax


def test_cpu_backend():
    assert jax.default_backend() == "cpu"
    assert all(d.platform == "cpu" for d in jax.devices())


def test_jit():
    @jax.jit
    def f(x, y):
        return jnp.sin(x) * y + jnp.sum(x * y)

    x = jnp.arange(8, dtype=jnp.float32)
    got = np.asarray(f(x, 2.0))
    want = np.sin(np.arange(8, dtype=np.float32)) * 2 + np.sum(np.arange(8) * 2)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert f.lower(x, 2.0).as_text().startswith("module")


def test_grad_and_vmap():
    def loss(w, x):
        return jnp.sum((x @ w) ** 2)

    w = jnp.ones((3,))
    x = jnp.arange(6.0).reshape(2, 3)
    g = jax.grad(loss)(w, x)
    np.testing.assert_allclose(np.asarray(g), 2 * np.arange(6.0).reshape(2, 3).T @
                               (np.arange(6.0).reshape(2, 3) @ np.ones(3)))
    per_row = jax.vmap(lambda r: jnp.dot(r, r))(x)
    assert per_row.tolist() == [5.0, 50.0]


def test_scan_and_while():
    def body(c, x):
        return c + x, c * x

    carry, ys = lax.scan(body, 0.0, jnp.arange(5.0))
    assert float(carry) == 10.0
    assert ys.tolist() == [0.0, 0.0, 2.0, 9.0, 24.0]
    assert int(lax.while_loop(lambda i: i < 100, lambda i: i * 2 + 1, 1)) == 127


def test_shape_mismatch():
    with pytest.raises(TypeError, match="dot_general requires contracting dimensions"):
        jnp.dot(jnp.ones((2, 3)), jnp.ones((2, 3)))
    with pytest.raises(TypeError, match="add got incompatible shapes"):
        jax.jit(lax.add)(jnp.ones(2), jnp.ones(3))


def test_compiled_wrong_argument():
    compiled = jax.jit(lambda x: x + 1).lower(jnp.ones(3)).compile()
    assert compiled(jnp.ones(3)).tolist() == [2.0, 2.0, 2.0]
    with pytest.raises(TypeError):
        compiled(jnp.ones(4))


def test_error_through_xla_runtime():
    """A Python error in a host callback goes through XLA's C++ runtime and comes back."""
    def cb(x):
        if x.sum() > 0:
            raise ValueError("callback refused")
        return x

    f = jax.jit(lambda x: jax.pure_callback(cb, jax.ShapeDtypeStruct((2,), jnp.float32), x))
    assert f(jnp.zeros(2, jnp.float32)).tolist() == [0.0, 0.0]
    with pytest.raises(Exception, match="callback refused"):
        f(jnp.ones(2, jnp.float32)).block_until_ready()


def test_out_of_memory_error():
    """XLA's CPU client refuses an impossible buffer with an error, caught here."""
    with pytest.raises(Exception, match="(?i)(resource|memory|allocat)"):
        jnp.zeros((1 << 44,), dtype=jnp.float32).block_until_ready()


def test_checkify_error():
    from jax.experimental import checkify

    def f(x):
        checkify.check(x > 0, "x must be positive, got {}", x)
        return jnp.log(x)

    err, out = jax.jit(checkify.checkify(f))(1.0)
    err.throw()
    assert float(out) == 0.0
    err, _ = jax.jit(checkify.checkify(f))(-1.0)
    with pytest.raises(checkify.JaxRuntimeError, match="x must be positive"):
        err.throw()
