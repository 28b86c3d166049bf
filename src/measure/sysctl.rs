//! Safe changes of vm.percpu_pagelist_high_fraction.
