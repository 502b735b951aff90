"""Shipping tuned kernels: ``ktune build`` turns the log's winners into a compiled library.

A build selects, per operator, dtype and layout on one device, the best config of each tuned
shape (the distinct configs are the *variants*), compiles each variant once with run-time
sizes (CPU: the system C compiler with the flags its trials were measured with; GPU: nvcc, SASS
per requested architecture), and generates a C dispatch decided at build time: a call runs the
variant tuned for the nearest tuned shape whose requirements hold at the called sizes, else a
default config valid at every shape. The output directory holds ``include/``, ``lib/``,
``manifest.json`` and CMake and pkg-config files.
"""
