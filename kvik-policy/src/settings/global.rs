//! The process-wide settings, as layers: a base (the environment, read once,
//! or what [`Settings::set_global`] gave) and, above it, the scoped
//! overrides alive now, oldest first.
//!
//! A scope keeps only the settings its update changed, with their new
//! values; the settings in force are the base with every live scope's
//! changes applied in the order the scopes were made. Dropping a scope
//! removes its layer, wherever it is in the stack, so scopes may end in any
//! order: once every scope has ended, the settings are the base again,
//! exactly.

use std::cell::Cell;
use std::sync::{OnceLock, RwLock};

use super::{Changed, EnvProblem, Settings};
use crate::error::{Error, Result};

// The environment, read once.
static ENVIRONMENT: OnceLock<std::result::Result<Settings, Vec<EnvProblem>>> = OnceLock::new();
static GLOBAL: RwLock<Layers> = RwLock::new(Layers::new());

thread_local! {
    /// While a scope's update runs on this thread: the settings its setters
    /// have set so far.
    static TOUCHED: Cell<Option<Changed>> = const { Cell::new(None) };
}

/// Note that a setter ran (`mark` adds its setting), if a scope's update is
/// running on this thread.
pub(super) fn touched(mark: impl FnOnce(&mut Changed)) {
    TOUCHED.with(|touched| {
        if let Some(mut set) = touched.get() {
            mark(&mut set);
            touched.set(Some(set));
        }
    });
}

/// Run `update`, and say which settings its setters set.
fn recording_setters<R>(update: impl FnOnce() -> R) -> (R, Changed) {
    let outer = TOUCHED.replace(Some(Changed::default()));
    let result = update();
    let set = TOUCHED.replace(outer).unwrap_or_default();
    (result, set)
}

/// The base and the live scopes above it.
#[derive(Debug)]
pub(crate) struct Layers {
    /// `None`: the environment.
    base: Option<Settings>,
    scopes: Vec<Scope>,
    next_id: u64,
}

/// One scoped override: the settings its update set or changed, and their
/// values. A setting set to the value it already had counts: the scope set
/// it, and keeps it set if the layer below it ends first.
#[derive(Debug)]
struct Scope {
    id: u64,
    values: Settings,
    changed: Changed,
}

impl Layers {
    pub(crate) const fn new() -> Layers {
        Layers {
            base: None,
            scopes: Vec::new(),
            next_id: 0,
        }
    }

    /// The settings in force: the base with every live scope applied.
    pub(crate) fn effective(
        &self,
        environment: impl FnOnce() -> Result<Settings>,
    ) -> Result<Settings> {
        let mut settings = match &self.base {
            Some(base) => base.clone(),
            None => environment()?,
        };
        for scope in &self.scopes {
            settings.overlay(&scope.values, &scope.changed);
        }
        Ok(settings)
    }

    /// Add a scope whose update runs on the settings in force; an update
    /// that fails adds nothing. Returns the scope's id.
    pub(crate) fn push(
        &mut self,
        update: impl FnOnce(&mut Settings) -> Result<()>,
        environment: impl FnOnce() -> Result<Settings>,
    ) -> Result<u64> {
        let current = self.effective(environment)?;
        let mut values = current.clone();
        let (result, set) = recording_setters(|| update(&mut values));
        result?;
        let id = self.next_id;
        self.next_id += 1;
        self.scopes.push(Scope {
            id,
            changed: current.changes(&values).union(set),
            values,
        });
        Ok(id)
    }

    /// Remove the scope `id`, wherever it is.
    pub(crate) fn remove(&mut self, id: u64) {
        self.scopes.retain(|scope| scope.id != id);
    }

    pub(crate) fn set_base(&mut self, base: Option<Settings>) {
        self.base = base;
    }
}

fn read_global() -> std::sync::RwLockReadGuard<'static, Layers> {
    // A poisoned lock only means a thread panicked while holding it; the
    // layers are replaced whole, never left half-written.
    GLOBAL.read().unwrap_or_else(|e| e.into_inner())
}

fn write_global() -> std::sync::RwLockWriteGuard<'static, Layers> {
    GLOBAL.write().unwrap_or_else(|e| e.into_inner())
}

impl Settings {
    /// The process-wide settings: the environment (read on first use, once)
    /// unless replaced through [`Settings::set_global`], with the changes of
    /// every live [`Settings::scoped`] override. A bad environment is an
    /// error every time it is asked for, until the API replaces it.
    pub fn global() -> Result<Settings> {
        read_global().effective(Settings::environment)
    }

    /// The settings the environment gave when it was first read.
    pub fn environment() -> Result<Settings> {
        ENVIRONMENT
            .get_or_init(|| {
                Settings::from_env().map_err(|e| match e {
                    Error::Environment { problems } => problems,
                    other => unreachable!("from_env only reports the environment: {other}"),
                })
            })
            .clone()
            .map_err(|problems| Error::Environment { problems })
    }

    /// Replace the base of the process-wide settings (until the next call,
    /// or [`Settings::reset_global`]). Scoped overrides alive now still
    /// apply above it until they end.
    pub fn set_global(settings: Settings) {
        write_global().set_base(Some(settings));
    }

    /// Go back to the settings the environment gave (scoped overrides alive
    /// now still apply above them until they end).
    pub fn reset_global() {
        write_global().set_base(None);
    }

    /// Change the process-wide settings until the returned guard drops
    /// (KvikIO's `with kvikio.defaults.set(...)`). The scope keeps only what
    /// `update` changed; dropping it takes exactly those changes away, so
    /// scopes may end in any order, and once all have ended the settings
    /// are what they were before the first. An `update` that fails changes
    /// nothing.
    ///
    /// ```
    /// # use kvik_policy::Settings;
    /// let before = Settings::global().unwrap().task_size();
    /// {
    ///     let _scope = Settings::scoped(|s| s.set_task_size(1 << 20).map(drop)).unwrap();
    ///     assert_eq!(Settings::global().unwrap().task_size(), 1 << 20);
    /// }
    /// assert_eq!(Settings::global().unwrap().task_size(), before);
    /// ```
    pub fn scoped(update: impl FnOnce(&mut Settings) -> Result<()>) -> Result<ScopedSettings> {
        let id = write_global().push(update, Settings::environment)?;
        Ok(ScopedSettings { id })
    }
}

/// A scoped override of the process-wide settings; its changes end when it
/// drops.
#[derive(Debug)]
#[must_use = "the override ends when this guard drops"]
pub struct ScopedSettings {
    id: u64,
}

impl Drop for ScopedSettings {
    fn drop(&mut self) {
        write_global().remove(self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CompatMode;

    type Update = fn(&mut Settings) -> Result<()>;

    fn base() -> Settings {
        let mut base = Settings::default();
        base.set_task_size(1 << 20).unwrap();
        base
    }

    fn no_environment() -> Result<Settings> {
        panic!("the base is set: the environment is never read")
    }

    /// Three scopes that overlap: A and B both set `task_size`, A and C
    /// both set `num_threads`.
    const UPDATES: [Update; 3] = [
        |s| {
            s.set_task_size(8192)?.set_num_threads(2)?;
            Ok(())
        },
        |s| s.set_task_size(4096).map(drop),
        |s| {
            s.set_num_threads(3)?
                .set_gds_threshold(0)
                .set_compat_mode(CompatMode::On);
            Ok(())
        },
    ];

    /// What the settings must be with the scopes `live` (by index into
    /// UPDATES) alive: their updates replayed on the base, oldest first.
    fn replayed(live: &[usize]) -> Settings {
        let mut settings = base();
        for &i in live {
            UPDATES[i](&mut settings).unwrap();
        }
        settings
    }

    fn permutations(items: &[usize]) -> Vec<Vec<usize>> {
        if items.len() <= 1 {
            return vec![items.to_vec()];
        }
        let mut all = Vec::new();
        for (i, &first) in items.iter().enumerate() {
            let mut rest = items.to_vec();
            rest.remove(i);
            for mut tail in permutations(&rest) {
                tail.insert(0, first);
                all.push(tail);
            }
        }
        all
    }

    #[test]
    fn scopes_dropped_in_any_order_restore_the_base() {
        let orders = permutations(&[0, 1, 2]);
        assert_eq!(orders.len(), 6);
        for order in orders {
            let mut layers = Layers::new();
            layers.set_base(Some(base()));
            let ids: Vec<u64> = UPDATES
                .iter()
                .map(|update| layers.push(update, no_environment).unwrap())
                .collect();
            assert_eq!(
                layers.effective(no_environment).unwrap(),
                replayed(&[0, 1, 2])
            );
            let mut live = vec![0, 1, 2];
            for &gone in &order {
                layers.remove(ids[gone]);
                live.retain(|&i| i != gone);
                assert_eq!(
                    layers.effective(no_environment).unwrap(),
                    replayed(&live),
                    "drop order {order:?}, alive {live:?}"
                );
            }
            assert_eq!(layers.effective(no_environment).unwrap(), base());
        }
    }

    #[test]
    fn a_scope_takes_away_only_what_it_changed() {
        let mut layers = Layers::new();
        layers.set_base(Some(base()));
        let outer = layers.push(UPDATES[0], no_environment).unwrap();
        let inner = layers.push(UPDATES[1], no_environment).unwrap();
        // The outer scope ends first: its num_threads goes, the inner
        // scope's task_size stays.
        layers.remove(outer);
        let s = layers.effective(no_environment).unwrap();
        assert_eq!(
            (s.task_size(), s.num_threads()),
            (4096, base().num_threads())
        );
        layers.remove(inner);
        assert_eq!(layers.effective(no_environment).unwrap(), base());
        // Removing twice, or an unknown scope, changes nothing.
        layers.remove(inner);
        layers.remove(1000);
        assert_eq!(layers.effective(no_environment).unwrap(), base());
    }

    #[test]
    fn a_scope_that_sets_what_the_scope_below_set_keeps_it() {
        let mut layers = Layers::new();
        layers.set_base(Some(base()));
        let outer = layers
            .push(|s| s.set_task_size(8192).map(drop), no_environment)
            .unwrap();
        // The same value again: nothing differs, but the inner scope set it.
        let inner = layers
            .push(|s| s.set_task_size(8192).map(drop), no_environment)
            .unwrap();
        layers.remove(outer);
        assert_eq!(layers.effective(no_environment).unwrap().task_size(), 8192);
        layers.remove(inner);
        assert_eq!(layers.effective(no_environment).unwrap(), base());
        // Setters outside a scope's update record nothing.
        let mut free = base();
        free.set_num_threads(5).unwrap();
        assert_eq!(TOUCHED.get(), None);
    }

    #[test]
    fn a_failed_update_or_environment_adds_no_scope() {
        let mut layers = Layers::new();
        layers.set_base(Some(base()));
        let err = layers
            .push(|s| s.set_num_threads(0).map(drop), no_environment)
            .unwrap_err();
        assert!(matches!(
            err,
            Error::InvalidSetting {
                setting: "num_threads",
                ..
            }
        ));
        assert!(layers.scopes.is_empty());

        let mut bad_environment = Layers::new();
        let problems = || {
            Err(Error::Environment {
                problems: vec![EnvProblem {
                    variable: "KVIKIO_TASK_SIZE",
                    value: "4x".into(),
                    problem: "unknown unit".into(),
                }],
            })
        };
        assert!(bad_environment.push(UPDATES[0], problems).is_err());
        assert!(bad_environment.scopes.is_empty());
    }

    #[test]
    fn a_new_base_shows_through_where_no_scope_changed_it() {
        let mut layers = Layers::new();
        layers.set_base(Some(base()));
        let scope = layers.push(UPDATES[1], no_environment).unwrap();
        let mut replaced = Settings::default();
        replaced
            .set_task_size(1)
            .unwrap()
            .set_num_threads(7)
            .unwrap();
        layers.set_base(Some(replaced.clone()));
        let s = layers.effective(no_environment).unwrap();
        assert_eq!((s.task_size(), s.num_threads()), (4096, 7));
        layers.remove(scope);
        assert_eq!(layers.effective(no_environment).unwrap(), replaced);
    }
}
