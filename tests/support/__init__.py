"""Helpers shared by the tests and the benchmarks: clocks, audio clips, the sound server, loop builders."""  # noqa: E501
