//! placeholder, being written by codegen
