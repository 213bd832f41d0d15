//! Reference kernels: one plain, obviously-correct implementation of every
//! op for every type it accepts. The oracle for all conformance testing.
