"""The compiled instruction-set engine: ``aiopim/isa/_interp.py`` built by Cython (its pure-Python
mode) into an extension module. The metadata lives in ``pyproject.toml``.

The extension is optional: where it cannot be built (no C compiler), the package installs
without it and runs the same file as plain Python, saying so once at the first DPU launch.
"""

from Cython.Build import cythonize
from setuptools import Extension, setup

ENGINE = Extension("aiopim.isa._interp", ["aiopim/isa/_interp.py"], extra_compile_args=["-O3"])

# the module's own header comment sets its compiler directives
extensions = cythonize([ENGINE])
for extension in extensions:
    extension.optional = True  # cythonize does not carry the flag over

setup(ext_modules=extensions)
