"""NIR files: reading and writing HDF5 (``hdf5``), interpreting a NIR graph (``interpreter``), the conformance diagnostics (``conformance``) and the CubaLIF readings (``cuba``).

Used by the frontend (reading a .nir model) and by the NIR target (writing and checking one)."""
