//! A decision allocates nothing: `authorize` and `authorized_operations` run once per
//! resource per request, so a counting global allocator checks they make no heap allocation,
//! with literal, wildcard and prefixed ACLs on the path, for allowed, denied and defaulted
//! answers and super users. The counter is checked to count, so a zero means something.
#![allow(clippy::unwrap_used)] // a test: a failed unwrap is the failure report

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use acl::AclOperation::*;
use acl::AclPermissionType::{Allow, Deny};
use acl::PatternType::{Literal as LIT, Prefixed as PRE};
use acl::ResourceType::{Group as G, Topic as T};
use acl::{Authorizer, Decision};
use common::{authorizer, config, Acl};

struct CountingAllocator;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    let _ = COUNTING.try_with(|counting| {
        if counting.get() {
            ALLOCATIONS.with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: forwards every call to the system allocator; only counts on the side.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// Heap allocations `f` makes on this thread.
fn allocations<R>(f: impl FnOnce() -> R) -> (R, u64) {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|c| c.set(true));
    let result = f();
    COUNTING.with(|c| c.set(false));
    (result, ALLOCATIONS.with(Cell::get))
}

fn acls() -> Authorizer {
    let acls: &[Acl] = &[
        (T, "orders", LIT, "User:alice", "*", Read, Allow),
        (T, "ord", PRE, "User:alice", "*", Write, Allow),
        (T, "o", PRE, "User:bob", "*", All, Deny),
        (T, "*", LIT, "User:carol", "10.0.0.9", Describe, Allow),
        (T, "payments", PRE, "User:*", "*", Read, Allow),
        (G, "g", LIT, "User:alice", "*", Read, Allow),
    ];
    authorizer(acls, config(&["User:admin"], true))
}

#[test]
fn authorize_allocates_nothing() {
    let authorizer = acls();
    let cases = [
        ("User:alice", Read, T, "orders", Decision::Allow),
        ("User:alice", Write, T, "orders-eu", Decision::Allow),
        ("User:bob", Read, T, "orders", Decision::Deny),
        ("User:alice", Delete, T, "orders", Decision::Deny),
        // The wildcard applies to every topic, so no topic gets the default.
        ("User:dave", Read, T, "unrelated", Decision::Deny),
        ("User:dave", Read, G, "unrelated", Decision::Allow),
        ("User:admin", Alter, T, "orders", Decision::Allow),
        ("User:dave", Read, T, "payments-2", Decision::Allow),
    ];
    for (principal, op, rt, name, expect) in cases {
        let (decision, count) =
            allocations(|| authorizer.authorize(principal, "10.0.0.1", op, rt, name));
        assert_eq!(decision, expect, "{principal} {op} {name}");
        assert_eq!(count, 0, "{principal} {op} {name} allocated");
        let (_, count) =
            allocations(|| authorizer.authorized_operations(principal, "10.0.0.1", rt, name));
        assert_eq!(
            count, 0,
            "authorized_operations {principal} {name} allocated"
        );
    }
}

/// The `_with` variants (the broker's settings, the image's ACLs) decide as an authorizer
/// built with those settings, and allocate nothing either.
#[test]
fn decisions_under_a_separate_config_match_and_allocate_nothing() {
    let configured = acls();
    let bare = {
        let mut bare = acls();
        bare.set_config(acl::AuthorizerConfig::default());
        bare
    };
    let settings = configured.config().clone();
    let principals = [
        "User:alice",
        "User:bob",
        "User:dave",
        "User:admin",
        "User:carol",
    ];
    let names = ["orders", "orders-eu", "unrelated", "payments-2", "g"];
    for principal in principals {
        for rt in [T, G] {
            for name in names {
                for op in [Read, Write, Describe, Delete, Alter] {
                    let (decision, count) = allocations(|| {
                        bare.authorize_with(&settings, principal, "10.0.0.9", op, rt, name)
                    });
                    assert_eq!(count, 0, "{principal} {op} {name} allocated");
                    let expect = configured.authorize(principal, "10.0.0.9", op, rt, name);
                    assert_eq!(decision, expect, "{principal} {op} {rt} {name}");
                }
                let (bits, count) = allocations(|| {
                    bare.authorized_operations_with(&settings, principal, "10.0.0.9", rt, name)
                });
                assert_eq!(count, 0);
                let expect = configured.authorized_operations(principal, "10.0.0.9", rt, name);
                assert_eq!(bits, expect, "{principal} {rt} {name}");
            }
            let (any, count) = allocations(|| {
                bare.authorize_any_with(&settings, principal, "10.0.0.9", Write, rt)
            });
            assert_eq!(count, 0);
            assert_eq!(
                any,
                configured.authorize_any(principal, "10.0.0.9", Write, rt)
            );
        }
    }
}

#[test]
fn the_counter_counts() {
    let (_, count) = allocations(|| std::hint::black_box(vec![1u8; 16]));
    assert_eq!(count, 1);
}
