"""HDF5 traces: the schema, an appending writer and a reader."""
