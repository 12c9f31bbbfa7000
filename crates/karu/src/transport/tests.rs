//! Integration tests of the transport against servers on 127.0.0.1.
