//! Digital-input modules read as one number: where a module keeps its inputs
//! (the built-in module profiles), the read request that fetches them, and the
//! number the answer makes (input 1 in bit 0).
//!
//! Register knowledge only: what a number means (a grid operator's limit) is
//! steering's business. Pure, no I/O.

use super::plan::{Span, Table};

/// Where a module's inputs are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputBlock {
    pub table: Table,
    /// The first input (discrete inputs) or the register holding them as bits.
    pub register: u16,
    /// How many inputs make the number (1 to 16).
    pub inputs: u8,
}

/// A built-in module profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Module {
    pub name: &'static str,
    pub description: &'static str,
    pub block: InputBlock,
}

/// The built-in module profiles.
pub const MODULES: &[Module] = &[
    Module {
        name: "generic-di",
        description: "discrete inputs from address 0 (function 2), input 1 at address 0: the layout of most Modbus digital input modules",
        block: InputBlock {
            table: Table::DiscreteInput,
            register: 0,
            inputs: 4,
        },
    },
    Module {
        name: "generic-di-register",
        description: "the inputs as the bits of input register 0 (function 4), input 1 in bit 0: modules and couplers that map their inputs into a register",
        block: InputBlock {
            table: Table::Input,
            register: 0,
            inputs: 16,
        },
    },
];

pub fn module(name: &str) -> Option<&'static Module> {
    MODULES.iter().find(|m| m.name == name)
}

/// The names of the built-in module profiles, for error messages.
pub fn module_names() -> String {
    MODULES
        .iter()
        .map(|m| m.name)
        .collect::<Vec<_>>()
        .join(", ")
}

impl InputBlock {
    /// The read that fetches the inputs.
    pub fn span(&self) -> Span {
        match self.table {
            Table::DiscreteInput => Span::new(self.table, self.register, u16::from(self.inputs)),
            Table::Holding | Table::Input => Span::new(self.table, self.register, 1),
        }
    }

    /// The inputs as one number, input 1 in bit 0; `None` when the answer does
    /// not have the length the read asked for.
    pub fn value(&self, words: &[u16]) -> Option<u16> {
        let n = u32::from(self.inputs.clamp(1, 16));
        let mask = ((1u32 << n) - 1) as u16;
        match self.table {
            Table::DiscreteInput => (words.len() == n as usize).then(|| {
                words
                    .iter()
                    .enumerate()
                    .fold(0u16, |v, (i, w)| v | (u16::from(*w != 0) << i))
            }),
            Table::Holding | Table::Input => match words {
                [w] => Some(w & mask),
                _ => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discrete_inputs_and_register_bits_make_the_same_number() {
        let di = module("generic-di").unwrap().block;
        assert_eq!(di.span(), Span::new(Table::DiscreteInput, 0, 4));
        assert_eq!(di.value(&[1, 0, 1, 0]), Some(0b0101));
        assert_eq!(di.value(&[1, 0, 1]), None);
        let reg = InputBlock {
            inputs: 4,
            ..module("generic-di-register").unwrap().block
        };
        assert_eq!(reg.span(), Span::new(Table::Input, 0, 1));
        assert_eq!(reg.value(&[0xFFF5]), Some(0b0101));
        assert!(module("nope").is_none());
        assert!(module_names().contains("generic-di-register"));
    }
}
