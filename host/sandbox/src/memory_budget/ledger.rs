//! Who may grow, who waits and who gives way: the decisions of the host's guest memory
//! budget, as a pure state machine. The shell (`super`) turns its answers into wakes.
//!
//! Every call opens an entry ([`Ledger::open`]), asks for each growth of its memories
//! ([`Ledger::ask`]), and closes when its Store goes ([`Ledger::close`]), which releases all it
//! held. A growth that fits is granted at once; one that does not waits in line.
//!
//! # Fairness
//! The line is first come, first served, with one exception: a call whose plugin, with the
//! growth, stays within its fair share (the budget divided among the plugins with calls open)
//! passes the waiters ahead of it that do not fit. So one plugin's large calls, waiting for
//! room, never hold up another plugin's small ones; and a large call at the head is not
//! starved by calls of plugins already past their share, which queue behind it.
//!
//! # Guarantees
//! - **Never more than the budget is granted.** `used <= total` after every step.
//! - **No plugin holds more than three quarters of it** ([`crate::config::plugin_room`]), its
//!   shadow included: what is left is the others', whatever one tenant does. A call that alone
//!   would hold more is never granted: a limit of the plugin's, not the host's pressure.
//! - **No deadlock.** Calls that hold memory while they wait for more could wait for each
//!   other forever. When a waiter can be helped by no running call holding memory (for one
//!   waiting on its plugin's cap, none of its plugin's), the youngest waiter holding memory
//!   that would help gives way ([`Moves::given_up`]): it fails as host pressure, and what it
//!   held goes to the others when it closes.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

/// Whose memory it is: a plugin (a shadow is its plugin's), by the name the host knows it by.
pub(crate) type Account = Arc<str>;

/// One call's entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct CallId(u64);

/// The answer to a growth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// Granted: grow.
    Granted,
    /// In line: wait for a wake ([`Moves`]).
    Queued,
    /// The call would hold more than the whole budget: it can never be granted.
    Never,
}

/// What a step did to calls other than the one that took it (or to it, when it gave way).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Moves {
    /// Waiters granted their growth: wake them to grow.
    pub(crate) granted: Vec<CallId>,
    /// Waiters that give way so that others can run: wake them to fail as host pressure.
    pub(crate) given_up: Vec<CallId>,
}

#[derive(Debug)]
struct Call {
    account: Account,
    held: u64,
    /// The growth it waits for, while in line.
    waiting: Option<u64>,
}

/// The budget's books. See the module documentation.
#[derive(Debug)]
pub(crate) struct Ledger {
    total: u64,
    /// What one plugin may hold.
    cap: u64,
    used: u64,
    calls: BTreeMap<CallId, Call>,
    line: VecDeque<CallId>,
    /// Bytes held, by plugin.
    held: HashMap<Account, u64>,
    /// Calls open, by plugin: the plugins that share the budget now.
    open: HashMap<Account, usize>,
    next: u64,
}

impl Ledger {
    /// An empty budget of `total` bytes.
    pub(crate) fn new(total: u64) -> Ledger {
        Ledger {
            total,
            cap: crate::config::plugin_room(total),
            used: 0,
            calls: BTreeMap::new(),
            line: VecDeque::new(),
            held: HashMap::new(),
            open: HashMap::new(),
            next: 0,
        }
    }

    /// The budget.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The bytes granted to calls open now.
    pub(crate) fn used(&self) -> u64 {
        self.used
    }

    /// Calls in line.
    pub(crate) fn waiting(&self) -> usize {
        self.line.len()
    }

    /// A call of `account` starts: it holds nothing yet.
    pub(crate) fn open(&mut self, account: Account) -> CallId {
        let id = CallId(self.next);
        self.next += 1;
        *self.open.entry(account.clone()).or_default() += 1;
        self.calls.insert(id, Call { account, held: 0, waiting: None });
        id
    }

    /// Call `id` asks to grow by `bytes`. When it is queued, the moves may include it giving
    /// way at once (everyone else waits too, and it is the youngest holding memory).
    pub(crate) fn ask(&mut self, id: CallId, bytes: u64) -> (Ask, Moves) {
        let Some(call) = self.calls.get(&id) else { return (Ask::Never, Moves::default()) };
        if call.waiting.is_some() {
            // One growth at a time: it is in line already.
            return (Ask::Queued, Moves::default());
        }
        if call.held.saturating_add(bytes) > self.cap {
            return (Ask::Never, Moves::default());
        }
        let account = call.account.clone();
        if self.room(&account, bytes) && (self.line.is_empty() || self.within_share(&account, bytes)) {
            self.grant(id, bytes);
            return (Ask::Granted, Moves::default());
        }
        self.calls.get_mut(&id).expect("checked above").waiting = Some(bytes);
        self.line.push_back(id);
        (Ask::Queued, self.unstick())
    }

    /// Call `id` stops waiting (its wait ran out): it leaves the line, holding what it held
    /// until it closes.
    pub(crate) fn give_up(&mut self, id: CallId) -> Moves {
        if let Some(call) = self.calls.get_mut(&id)
            && call.waiting.take().is_some()
        {
            self.line.retain(|waiter| *waiter != id);
        }
        self.pump()
    }

    /// Call `id` ends: what it held goes back, and waiters that now fit are granted.
    pub(crate) fn close(&mut self, id: CallId) -> Moves {
        let Some(call) = self.calls.remove(&id) else { return Moves::default() };
        if call.waiting.is_some() {
            self.line.retain(|waiter| *waiter != id);
        }
        self.used -= call.held;
        if let Some(held) = self.held.get_mut(&call.account) {
            *held -= call.held;
            if *held == 0 {
                self.held.remove(&call.account);
            }
        }
        if let Some(open) = self.open.get_mut(&call.account) {
            *open -= 1;
            if *open == 0 {
                self.open.remove(&call.account);
            }
        }
        self.pump()
    }

    fn fits(&self, bytes: u64) -> bool {
        self.used.saturating_add(bytes) <= self.total
    }

    /// Whether `account` may grow by `bytes` now: it fits the budget, and the plugin's cap.
    fn room(&self, account: &Account, bytes: u64) -> bool {
        self.fits(bytes) && !self.over_cap(account, bytes)
    }

    fn over_cap(&self, account: &Account, bytes: u64) -> bool {
        self.held.get(account).copied().unwrap_or(0).saturating_add(bytes) > self.cap
    }

    /// Whether `account`, grown by `bytes`, holds no more than its share: the budget divided
    /// among the plugins with calls open.
    fn within_share(&self, account: &Account, bytes: u64) -> bool {
        let plugins = self.open.len().max(1) as u64;
        let held = self.held.get(account).copied().unwrap_or(0);
        held.saturating_add(bytes) <= self.total / plugins
    }

    fn grant(&mut self, id: CallId, bytes: u64) {
        let call = self.calls.get_mut(&id).expect("granted calls are open");
        call.held += bytes;
        call.waiting = None;
        self.used += bytes;
        *self.held.entry(call.account.clone()).or_default() += bytes;
    }

    /// Grants, in line order, every waiter that fits: before the first that does not, any;
    /// after it, only those within their plugin's share. Then breaks a deadlock, if any.
    fn pump(&mut self) -> Moves {
        let mut moves = Moves::default();
        let mut blocked = false;
        let mut at = 0;
        while let Some(&id) = self.line.get(at) {
            let call = &self.calls[&id];
            let bytes = call.waiting.expect("calls in line wait");
            if self.room(&call.account, bytes) && (!blocked || self.within_share(&call.account, bytes)) {
                self.line.remove(at);
                self.grant(id, bytes);
                moves.granted.push(id);
                continue;
            }
            // One waiting on its own plugin's cap holds up nobody else.
            blocked |= !self.fits(bytes);
            at += 1;
        }
        let unstuck = self.unstick();
        moves.granted.extend(unstuck.granted);
        moves.given_up.extend(unstuck.given_up);
        moves
    }

    /// When a waiter can be helped by no running call holding memory, the youngest waiter
    /// holding memory that would help it leaves the line to fail; it releases when it closes.
    /// A waiter on its plugin's cap is helped only by its plugin's memory; one on the budget,
    /// by anyone's.
    fn unstick(&mut self) -> Moves {
        let capped = |ledger: &Ledger, id: &CallId| {
            let call = &ledger.calls[id];
            ledger.over_cap(&call.account, call.waiting.unwrap_or(0))
        };
        let helps = |ledger: &Ledger, helper: &Call, waiter: &CallId| {
            helper.held > 0 && (!capped(ledger, waiter) || helper.account == ledger.calls[waiter].account)
        };
        let hopeless: Vec<CallId> = self
            .line
            .iter()
            .filter(|waiter| !self.calls.values().any(|c| c.waiting.is_none() && helps(self, c, waiter)))
            .copied()
            .collect();
        let victim = self
            .line
            .iter()
            .rev()
            .copied()
            .find(|id| hopeless.iter().any(|waiter| helps(self, &self.calls[id], waiter)));
        match victim {
            Some(id) => {
                self.calls.get_mut(&id).expect("in line").waiting = None;
                self.line.retain(|waiter| *waiter != id);
                Moves { granted: Vec::new(), given_up: vec![id] }
            }
            // Nothing is held that would help, so each waiter gets room once the running
            // calls end (`Never` keeps out what cannot).
            None => Moves::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn account(name: &str) -> Account {
        Arc::from(name)
    }

    #[test]
    fn a_growth_that_fits_is_granted_at_once() {
        let mut ledger = Ledger::new(100 * MIB);
        let call = ledger.open(account("a"));
        assert_eq!(ledger.ask(call, 60 * MIB).0, Ask::Granted);
        assert_eq!(ledger.used(), 60 * MIB);
    }

    #[test]
    fn a_growth_past_the_budget_waits_until_another_call_closes() {
        let mut ledger = Ledger::new(100 * MIB);
        let (first, second) = (ledger.open(account("a")), ledger.open(account("b")));
        ledger.ask(first, 60 * MIB);
        assert_eq!(ledger.ask(second, 60 * MIB).0, Ask::Queued);
        assert_eq!(ledger.used(), 60 * MIB);
        let moves = ledger.close(first);
        assert_eq!(moves.granted, vec![second]);
        assert_eq!(ledger.used(), 60 * MIB);
    }

    #[test]
    fn a_call_that_would_hold_more_than_one_plugin_may_is_never_granted() {
        let mut ledger = Ledger::new(100 * MIB);
        let call = ledger.open(account("a"));
        ledger.ask(call, 60 * MIB);
        assert_eq!(ledger.ask(call, 16 * MIB).0, Ask::Never, "75 of 100 is what a plugin may hold");
        assert_eq!(ledger.used(), 60 * MIB, "nothing more is held");
    }

    #[test]
    fn one_plugin_never_holds_more_than_three_quarters_and_another_finds_room() {
        let mut ledger = Ledger::new(100 * MIB);
        let calls: Vec<CallId> = (0..4).map(|_| ledger.open(account("a"))).collect();
        let granted: Vec<Ask> = calls.iter().map(|call| ledger.ask(*call, 20 * MIB).0).collect();
        assert_eq!(granted, [Ask::Granted, Ask::Granted, Ask::Granted, Ask::Queued], "60 held, 80 past the cap");
        let other = ledger.open(account("b"));
        assert_eq!(ledger.ask(other, 20 * MIB).0, Ask::Granted, "b finds the quarter a may not take");
        assert_eq!(ledger.close(calls[0]).granted, vec![calls[3]], "a's waiter gets a's own room back");
    }

    #[test]
    fn calls_of_one_plugin_that_wait_on_its_cap_have_the_youngest_give_way() {
        let mut ledger = Ledger::new(100 * MIB);
        let (a1, a2) = (ledger.open(account("a")), ledger.open(account("a")));
        let b = ledger.open(account("b"));
        ledger.ask(a1, 30 * MIB);
        ledger.ask(a2, 30 * MIB);
        ledger.ask(b, 10 * MIB);
        assert_eq!(ledger.ask(a1, 20 * MIB), (Ask::Queued, Moves::default()), "a2 still runs");
        let (ask, moves) = ledger.ask(a2, 20 * MIB);
        assert_eq!(ask, Ask::Queued);
        assert_eq!(moves.given_up, vec![a2], "b runs, but only a's memory helps a: a2 gives way");
    }

    #[test]
    fn another_plugins_small_growth_passes_a_large_waiter() {
        let mut ledger = Ledger::new(100 * MIB);
        let (big, bigger) = (ledger.open(account("a")), ledger.open(account("a")));
        let small = ledger.open(account("b"));
        ledger.ask(big, 70 * MIB);
        assert_eq!(ledger.ask(bigger, 70 * MIB).0, Ask::Queued);
        assert_eq!(ledger.ask(small, 2 * MIB).0, Ask::Granted, "b is within its half");
    }

    #[test]
    fn a_plugin_past_its_share_queues_behind_a_waiter() {
        let mut ledger = Ledger::new(100 * MIB);
        let (big, waiter) = (ledger.open(account("a")), ledger.open(account("a")));
        // Open, so that a's share is half the budget.
        ledger.open(account("b"));
        ledger.ask(big, 70 * MIB);
        ledger.ask(waiter, 70 * MIB);
        let late = ledger.open(account("a"));
        assert_eq!(ledger.ask(late, 2 * MIB).0, Ask::Queued, "a holds 70 of its 33");
        // When room comes, the line's order holds: the head first.
        let moves = ledger.close(big);
        assert_eq!(moves.granted, vec![waiter, late]);
    }

    #[test]
    fn a_large_waiter_at_the_head_is_not_passed_by_calls_past_their_share() {
        let mut ledger = Ledger::new(100 * MIB);
        let (a1, a2) = (ledger.open(account("a")), ledger.open(account("a")));
        let (b1, b2) = (ledger.open(account("b")), ledger.open(account("b")));
        ledger.ask(a1, 35 * MIB);
        ledger.ask(b1, 30 * MIB);
        assert_eq!(ledger.ask(a2, 40 * MIB).0, Ask::Queued, "105 of 100");
        assert_eq!(ledger.ask(b2, 26 * MIB).0, Ask::Queued, "b would hold 56 of its 50");
        let moves = ledger.close(b1);
        assert_eq!(moves.granted, vec![a2], "the head first; then b2 no longer fits");
    }

    #[test]
    fn calls_that_all_wait_on_each_other_have_the_youngest_give_way() {
        let mut ledger = Ledger::new(100 * MIB);
        let (a, b) = (ledger.open(account("a")), ledger.open(account("b")));
        ledger.ask(a, 45 * MIB);
        ledger.ask(b, 45 * MIB);
        assert_eq!(ledger.ask(a, 20 * MIB), (Ask::Queued, Moves::default()), "b still runs");
        let (ask, moves) = ledger.ask(b, 20 * MIB);
        assert_eq!(ask, Ask::Queued);
        assert_eq!(moves.given_up, vec![b], "both wait: the younger gives way");
        let moves = ledger.close(b);
        assert_eq!(moves.granted, vec![a]);
        assert_eq!(ledger.used(), 65 * MIB);
    }

    #[test]
    fn a_waiter_that_gives_up_leaves_the_line_and_holds_until_it_closes() {
        let mut ledger = Ledger::new(100 * MIB);
        let (running, waiter) = (ledger.open(account("a")), ledger.open(account("b")));
        ledger.ask(running, 70 * MIB);
        ledger.ask(waiter, 5 * MIB);
        ledger.ask(waiter, 50 * MIB);
        assert_eq!(ledger.give_up(waiter), Moves::default());
        assert_eq!((ledger.waiting(), ledger.used()), (0, 75 * MIB));
        ledger.close(waiter);
        assert_eq!(ledger.used(), 70 * MIB);
    }

    #[test]
    fn closing_returns_every_byte_and_forgets_the_plugin() {
        let mut ledger = Ledger::new(100 * MIB);
        let call = ledger.open(account("a"));
        ledger.ask(call, 10 * MIB);
        ledger.ask(call, 10 * MIB);
        ledger.close(call);
        assert_eq!(ledger.used(), 0);
        assert!(ledger.held.is_empty() && ledger.open.is_empty() && ledger.calls.is_empty());
    }

    #[test]
    fn a_waiter_closed_before_its_grant_leaves_the_line() {
        let mut ledger = Ledger::new(100 * MIB);
        let (running, waiter, next) = (ledger.open(account("a")), ledger.open(account("b")), ledger.open(account("c")));
        ledger.ask(running, 70 * MIB);
        ledger.ask(waiter, 50 * MIB);
        ledger.ask(next, 35 * MIB);
        assert_eq!(ledger.close(waiter), Moves::default());
        assert_eq!(ledger.waiting(), 1);
        assert_eq!(ledger.close(running).granted, vec![next]);
        assert_eq!(ledger.waiting(), 0);
    }

    #[test]
    fn the_budget_is_never_overdrawn_whatever_the_order() {
        // Every interleaving of a small script of asks and closes keeps used within total and
        // equal to what the open calls hold.
        let script: [(usize, u64); 8] = [(0, 30), (1, 50), (2, 40), (0, 30), (3, 10), (1, 20), (2, 10), (3, 90)];
        for rotation in 0..script.len() {
            let mut ledger = Ledger::new(100 * MIB);
            let calls: Vec<CallId> = ["a", "b", "a", "c"].iter().map(|n| ledger.open(account(n))).collect();
            for (step, &(who, mib)) in script.iter().cycle().skip(rotation).take(script.len()).enumerate() {
                if step % 3 == 2 {
                    ledger.close(calls[who]);
                } else {
                    ledger.ask(calls[who], mib * MIB);
                }
                let held: u64 = ledger.calls.values().map(|c| c.held).sum();
                assert!(ledger.used() <= ledger.total(), "rotation {rotation} step {step}");
                assert_eq!(ledger.used(), held, "rotation {rotation} step {step}");
                assert!(ledger.held.values().all(|h| *h <= ledger.cap), "rotation {rotation} step {step}");
            }
        }
    }
}
