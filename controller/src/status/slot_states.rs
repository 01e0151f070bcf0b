//! One reporter's state code per slot of a pool's tally (`super::tally`), stored by what it
//! usually is: a sidecar mostly sees every endpoint in the same state (healthy), so its report
//! is kept as "slots below `len` are `common`" plus the few exceptions, not one byte per slot.
//! A report whose exceptions grow past a sixteenth of its slots (a map entry costs about as
//! much as sixteen bytes of a dense array; at least 256) turns into the dense array; a complete
//! report is stored anew in whichever form is smaller. Code 0 means "not reported"; so does
//! every slot at or past the end.

use crate::FastMap;

/// A sparse report turns dense once it has more exceptions than this for `len` slots: a
/// sixteenth of them, and never fewer than 256, so a report in parts that starts with a run of
/// exceptions (a zone unreachable) is not judged on its first few slots.
fn exception_limit(len: u32) -> usize {
    (len as usize / 16).max(256)
}

#[derive(Debug)]
pub enum SlotStates {
    /// Slots below `len` hold `common` unless listed in `except`; slots past it hold 0.
    Mostly {
        len: u32,
        common: u8,
        except: FastMap<u32, u8>,
    },
    /// The code of each slot; past the end, 0.
    Dense(Vec<u8>),
}

impl Default for SlotStates {
    fn default() -> Self {
        Self::Mostly {
            len: 0,
            common: 0,
            except: FastMap::default(),
        }
    }
}

// === impl SlotStates ===

impl SlotStates {
    /// The compact form of `codes` (one code per slot from slot 0).
    pub fn from_codes(mut codes: Vec<u8>) -> Self {
        while codes.last() == Some(&0) {
            codes.pop();
        }
        if codes.is_empty() {
            return Self::default();
        }
        let mut frequency = [0usize; 256];
        for c in &codes {
            frequency[usize::from(*c)] += 1;
        }
        let common = (0..=u8::MAX)
            .max_by_key(|c| frequency[usize::from(*c)])
            .unwrap_or(0);
        let len = codes.len() as u32;
        if codes.len() - frequency[usize::from(common)] > exception_limit(len) {
            codes.shrink_to_fit();
            return Self::Dense(codes);
        }
        let except = codes
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != common)
            .map(|(slot, c)| (slot as u32, *c))
            .collect();
        Self::Mostly {
            len,
            common,
            except,
        }
    }

    /// The smaller form of the same states.
    pub fn compacted(self) -> Self {
        match self {
            Self::Dense(codes) => Self::from_codes(codes),
            sparse => sparse,
        }
    }

    /// The code of `slot` (0: not reported).
    pub fn get(&self, slot: u32) -> u8 {
        match self {
            Self::Mostly {
                len,
                common,
                except,
            } => {
                if slot >= *len {
                    0
                } else if except.is_empty() {
                    *common
                } else {
                    except.get(&slot).copied().unwrap_or(*common)
                }
            }
            Self::Dense(codes) => codes.get(slot as usize).copied().unwrap_or(0),
        }
    }

    /// Set the code of `slot`.
    pub fn set(&mut self, slot: u32, code: u8) {
        let densify = match self {
            Self::Dense(codes) => {
                let index = slot as usize;
                if codes.len() <= index {
                    if code == 0 {
                        return;
                    }
                    codes.resize(index + 1, 0);
                }
                codes[index] = code;
                false
            }
            Self::Mostly {
                len,
                common,
                except,
            } => {
                if slot < *len {
                    if code == *common {
                        except.remove(&slot);
                    } else {
                        except.insert(slot, code);
                    }
                } else if code != 0 {
                    // The slots between the end and `slot` are not reported: exceptions
                    // unless "not reported" is what is common.
                    if *len == 0 {
                        *common = code;
                    }
                    if *common != 0 {
                        except.extend((*len..slot).map(|s| (s, 0)));
                    }
                    if code != *common {
                        except.insert(slot, code);
                    }
                    *len = slot + 1;
                }
                except.len() > exception_limit(*len)
            }
        };
        if densify {
            let codes = (0..self.end()).map(|s| self.get(s)).collect();
            *self = Self::Dense(codes);
        }
    }

    /// One past the last slot that may be reported.
    fn end(&self) -> u32 {
        match self {
            Self::Mostly { len, .. } => *len,
            Self::Dense(codes) => codes.len() as u32,
        }
    }

    /// The reported slots (code not 0) with their codes, in slot order.
    pub fn occupied(&self) -> impl Iterator<Item = (u32, u8)> + '_ {
        (0..self.end())
            .map(|slot| (slot, self.get(slot)))
            .filter(|(_, code)| *code != 0)
    }

    /// Whether both say the same about every slot, whatever their form.
    pub fn same(&self, other: &Self) -> bool {
        if let (
            Self::Mostly {
                len: a_len,
                common: a_common,
                except: a_except,
            },
            Self::Mostly {
                len: b_len,
                common: b_common,
                except: b_except,
            },
        ) = (self, other)
            && a_len == b_len
            && a_common == b_common
        {
            return a_except == b_except;
        }
        (0..self.end().max(other.end())).all(|slot| self.get(slot) == other.get(slot))
    }

    /// Whether it is stored one byte per slot (for tests of the form chosen).
    #[cfg(test)]
    pub fn is_dense(&self) -> bool {
        matches!(self, Self::Dense(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A plain array as the model: what every form must agree with.
    fn model_get(model: &[u8], slot: u32) -> u8 {
        model.get(slot as usize).copied().unwrap_or(0)
    }

    fn agrees(states: &SlotStates, model: &[u8]) {
        for slot in 0..(model.len() as u32 + 3) {
            assert_eq!(states.get(slot), model_get(model, slot), "slot {slot}");
        }
        let occupied: Vec<(u32, u8)> = states.occupied().collect();
        let expected: Vec<(u32, u8)> = model
            .iter()
            .enumerate()
            .filter(|(_, c)| **c != 0)
            .map(|(s, c)| (s as u32, *c))
            .collect();
        assert_eq!(occupied, expected);
    }

    #[test]
    fn a_uniform_report_is_stored_without_a_byte_per_slot() {
        let states = SlotStates::from_codes(vec![1; 10_000]);
        assert!(!states.is_dense());
        let SlotStates::Mostly { except, .. } = &states else {
            unreachable!()
        };
        assert!(except.is_empty());
        agrees(&states, &[1; 10_000]);
    }

    #[test]
    fn a_report_with_many_exceptions_is_dense_and_both_forms_read_alike() {
        let mixed: Vec<u8> = (0..1000).map(|i| (i % 5 + 1) as u8).collect();
        let dense = SlotStates::from_codes(mixed.clone());
        assert!(dense.is_dense());
        agrees(&dense, &mixed);
        let mut few = vec![1u8; 1000];
        few[7] = 5;
        few[999] = 0;
        let sparse = SlotStates::from_codes(few.clone());
        assert!(!sparse.is_dense());
        agrees(&sparse, &few);
        // Trailing "not reported" slots are not stored.
        assert_eq!(sparse.occupied().last(), Some((998, 1)));
    }

    #[test]
    fn changes_keep_every_form_equal_to_the_model_and_exceptions_make_it_dense() {
        // A pseudo-random walk of changes from a uniform start, checked against the model
        // after every step; with enough different codes it must turn dense on its own.
        let mut model = vec![1u8; 500];
        let mut states = SlotStates::from_codes(model.clone());
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut went_dense = false;
        for step in 0..3000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let slot = (seed % 700) as u32;
            let code = ((seed >> 20) % 6) as u8;
            states.set(slot, code);
            if model.len() <= slot as usize && code != 0 {
                model.resize(slot as usize + 1, 0);
            }
            if let Some(c) = model.get_mut(slot as usize) {
                *c = code;
            }
            went_dense |= states.is_dense();
            if step % 97 == 0 {
                agrees(&states, &model);
            }
        }
        agrees(&states, &model);
        assert!(went_dense, "thousands of mixed codes are stored dense");
    }

    #[test]
    fn setting_past_the_end_fills_the_gap_with_not_reported() {
        let mut states = SlotStates::default();
        states.set(3, 1);
        agrees(&states, &[0, 0, 0, 1]);
        states.set(6, 1);
        agrees(&states, &[0, 0, 0, 1, 0, 0, 1]);
        states.set(4, 1);
        states.set(5, 1);
        states.set(0, 2);
        agrees(&states, &[2, 0, 0, 1, 1, 1, 1]);
        // Clearing past the end changes nothing.
        states.set(50, 0);
        agrees(&states, &[2, 0, 0, 1, 1, 1, 1]);
    }

    #[test]
    fn the_same_states_compare_equal_in_either_form() {
        let mut codes = vec![1u8; 200];
        codes[5] = 5;
        let sparse = SlotStates::from_codes(codes.clone());
        let dense = SlotStates::Dense(codes.clone());
        assert!(sparse.same(&dense) && dense.same(&sparse));
        let mut longer = codes.clone();
        longer.extend([0, 0, 0]);
        assert!(
            SlotStates::Dense(longer).same(&sparse),
            "trailing zeros are nothing"
        );
        let mut other = codes;
        other[6] = 2;
        assert!(!SlotStates::from_codes(other).same(&sparse));
    }
}
