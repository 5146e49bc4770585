# The multiprocessing tests with the 'spawn' start method, for interpreters whose installed test
# package has test/_test_multiprocessing.py but not this module (pyenv's 3.11.7 and 3.12.1: their
# install left the test_multiprocessing_* modules out).  Run by tests/cpython/cpython.py with
# regrtest's --testdir (not under its own name: 3.12's regrtest takes that name for a directory).
from test._test_multiprocessing import install_tests_in_module_dict

install_tests_in_module_dict(globals(), 'spawn')
