"""Other formats in and out of trajstore, one package per format: :mod:`trajstore.interop.lerobot`
(LeRobot v3.0 datasets) and :mod:`trajstore.interop.zarr` (Diffusion Policy's zarr replay buffers).
Each imports its optional dependencies (pyarrow, av, zarr) when used."""
