//! The pre-norm transformer block and the GPT model.

use super::{Batch, Head, HeadDim, Hidden, Inner, MultiHeadAttention, Stream, Token, Vocab};
use crate::arena::Slot;
use crate::autodiff::{Var, softmax_cross_entropy};
use crate::axis::Axis;
use crate::error::{Error, Result};
use crate::eval::ExprExt;
use crate::nn::embedding::Embedding;
use crate::nn::layers::Linear;
use crate::nn::norm::LayerNorm;
use crate::nn::params::{Bound, Init, Params, ParamsBuilder};
use crate::num::Float;
use crate::tensor::{IndexElement, Tensor};

/// A GPT's sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GptConfig {
    /// The number of token ids.
    pub vocab: usize,
    /// The longest sequence (the position table's length).
    pub context: usize,
    /// The residual stream's width.
    pub hidden: usize,
    /// The attention heads per block.
    pub heads: usize,
    /// The width of one head.
    pub head_dim: usize,
    /// The hidden width of each block's MLP.
    pub inner: usize,
    /// The number of blocks.
    pub layers: usize,
}

/// The weights' initialisation: GPT-2's normal with standard deviation 0.02.
const INIT: Init = Init::Normal(0.02);
/// Layer norms' epsilon (PyTorch's default).
const EPS: f64 = 1e-5;

/// A pre-norm transformer block: `x + attention(norm(x))`, then `x + mlp(norm(x))` with a
/// GELU between the MLP's two layers. Parameters `{name}.{norm1,attention,norm2,up,down}.*`.
#[derive(Clone)]
pub struct Block {
    /// The norm before the attention.
    pub norm1: LayerNorm<Hidden>,
    /// The attention.
    pub attention: MultiHeadAttention,
    /// The norm before the MLP.
    pub norm2: LayerNorm<Hidden>,
    /// The MLP's first layer.
    pub up: Linear<Hidden, Inner>,
    /// The MLP's second layer.
    pub down: Linear<Inner, Hidden>,
}

impl Block {
    /// Reserves the block's parameters.
    pub fn new(params: &mut ParamsBuilder, name: &str, config: &GptConfig) -> Result<Self> {
        let hidden = Hidden.len(config.hidden);
        Ok(Block {
            norm1: LayerNorm::new(params, &format!("{name}.norm1"), hidden, EPS)?,
            attention: MultiHeadAttention::new(
                params,
                &format!("{name}.attention"),
                hidden,
                Head.len(config.heads),
                HeadDim.len(config.head_dim),
                INIT,
            )?,
            norm2: LayerNorm::new(params, &format!("{name}.norm2"), hidden, EPS)?,
            up: Linear::new(
                params,
                &format!("{name}.up"),
                hidden,
                Inner.len(config.inner),
                INIT,
            )?,
            down: Linear::new(
                params,
                &format!("{name}.down"),
                Inner.len(config.inner),
                hidden,
                INIT,
            )?,
        })
    }

    /// The block applied to the stream `x`, on the tape.
    pub fn forward<T: Float>(
        &self,
        p: &Bound<'_, T>,
        x: &Var<T, Stream>,
    ) -> Result<Var<T, Stream>> {
        let attended = self.attention.forward(p, &self.norm1.forward(p, x)?)?;
        let x = (x + &attended).eval()?;
        let h = self.up.forward(p, self.norm2.forward(p, &x)?)?.gelu();
        let mlp = self.down.forward(p, h)?;
        (&x + mlp).eval()
    }

    /// The block applied to the stream `x`, without a tape (inference).
    pub fn infer<T: Float>(
        &self,
        params: &Params<T>,
        x: &Tensor<T, Stream>,
    ) -> Result<Tensor<T, Stream>> {
        let attended = self
            .attention
            .infer(params, &self.norm1.infer(params, x)?)?;
        let x = (x + &attended).eval()?;
        let h = self.up.infer(params, &self.norm2.infer(params, &x)?)?;
        let mlp = self.down.infer(params, &h.gelu().eval()?)?;
        (&x + &mlp).eval()
    }
}

/// A decoder-only transformer over token ids `(Batch, Token)`: token and position embeddings,
/// [`Block`]s, a final norm, and a linear head to logits `(Batch, Token, Vocab)`. Each
/// position's logits depend only on the tokens up to it (the attention is causal), so one pass
/// gives a next-token prediction at every position. Parameters `{name}.tokens.weight`,
/// `{name}.positions`, `{name}.blocks.{i}.*`, `{name}.norm.*`, `{name}.head.*`.
#[derive(Clone)]
pub struct Gpt {
    /// The token embedding.
    pub tokens: Embedding<Vocab, Hidden>,
    /// The position embedding.
    pub positions: Slot<(Token, Hidden)>,
    /// The blocks.
    pub blocks: Vec<Block>,
    /// The final norm.
    pub norm: LayerNorm<Hidden>,
    /// The head, from the stream to the logits.
    pub head: Linear<Hidden, Vocab>,
    /// The sizes.
    pub config: GptConfig,
}

impl GptConfig {
    /// An error naming the first size that is 0 (every size but `layers` must be at least
    /// 1: a model with no heads or no hidden width builds, and trains at a constant loss).
    ///
    /// ```
    /// # extern crate axes_core as axes;
    /// use axes::nn::transformer::GptConfig;
    /// let config = GptConfig { vocab: 11, context: 8, hidden: 16, heads: 0, head_dim: 8, inner: 32, layers: 2 };
    /// let error = config.check().unwrap_err().to_string();
    /// assert!(error.contains("`GptConfig::heads` is 0"), "{error}");
    /// ```
    pub fn check(&self) -> Result<()> {
        let sizes = [
            ("vocab", self.vocab),
            ("context", self.context),
            ("hidden", self.hidden),
            ("heads", self.heads),
            ("head_dim", self.head_dim),
            ("inner", self.inner),
        ];
        match sizes.into_iter().find(|&(_, size)| size == 0) {
            Some((name, size)) => Err(Error::InvalidSetting {
                setting: format!("GptConfig::{name}"),
                value: size.to_string(),
                allowed: "at least 1".into(),
            }),
            None => Ok(()),
        }
    }
}

impl Gpt {
    /// Reserves the model's parameters; an error if a size of `config` is 0
    /// ([`GptConfig::check`]).
    pub fn new(params: &mut ParamsBuilder, name: &str, config: &GptConfig) -> Result<Self> {
        config.check()?;
        let (vocab, hidden) = (Vocab.len(config.vocab), Hidden.len(config.hidden));
        Ok(Gpt {
            tokens: Embedding::new(params, &format!("{name}.tokens"), vocab, hidden, INIT)?,
            positions: params.add(
                &format!("{name}.positions"),
                (Token.len(config.context), hidden),
                INIT,
                config.context,
                config.hidden,
            )?,
            blocks: (0..config.layers)
                .map(|i| Block::new(params, &format!("{name}.blocks.{i}"), config))
                .collect::<Result<_>>()?,
            norm: LayerNorm::new(params, &format!("{name}.norm"), hidden, EPS)?,
            head: Linear::new(params, &format!("{name}.head"), hidden, vocab, INIT)?,
            config: config.clone(),
        })
    }

    /// The logits at every position of `ids`, on the tape.
    pub fn forward<T: Float, Ix: IndexElement>(
        &self,
        p: &Bound<'_, T>,
        ids: &Tensor<Ix, (Batch, Token)>,
    ) -> Result<Var<T, (Batch, Token, Vocab)>> {
        let n = self.check_length(ids)?;
        let positions = p.var(&self.positions)?.slice::<Token>(0..n, 1)?;
        let mut x: Var<T, Stream> = (self.tokens.forward(p, ids)? + &positions)
            .eval()?
            .axes_with_order();
        for block in &self.blocks {
            x = block.forward(p, &x)?;
        }
        let x = self.norm.forward(p, &x)?;
        self.head.forward(p, &x)?.eval()
    }

    /// The mean next-token cross-entropy (nats per token) of the logits of `ids` against
    /// `targets` (the id that follows each position), on the tape.
    pub fn loss<T: Float, Ix: IndexElement>(
        &self,
        p: &Bound<'_, T>,
        ids: &Tensor<Ix, (Batch, Token)>,
        targets: &Tensor<Ix, (Batch, Token)>,
    ) -> Result<Var<T, ()>> {
        let logits = self.forward(p, ids)?;
        softmax_cross_entropy::<Vocab, _, _, _, _>(&logits, targets)?.mean::<(Batch, Token)>()
    }

    /// The logits at every position of `ids`, without a tape (inference): the values of
    /// [`Gpt::forward`].
    pub fn infer<T: Float, Ix: IndexElement>(
        &self,
        params: &Params<T>,
        ids: &Tensor<Ix, (Batch, Token)>,
    ) -> Result<Tensor<T, (Batch, Token, Vocab)>> {
        let n = self.check_length(ids)?;
        let positions = params.tensor(&self.positions)?.slice::<Token>(0..n, 1)?;
        let mut x: Tensor<T, Stream> = (&self.tokens.infer(params, ids)? + &positions)
            .eval()?
            .axes_with_order();
        for block in &self.blocks {
            x = block.infer(params, &x)?;
        }
        self.head.infer(params, &self.norm.infer(params, &x)?)
    }

    /// The length of `ids` along [`Token`]; an error above the context.
    fn check_length<Ix: IndexElement>(&self, ids: &Tensor<Ix, (Batch, Token)>) -> Result<usize> {
        let n = ids.len_of::<Token>();
        if n > self.config.context {
            return Err(Error::ContextExceeded {
                axis: Token::name().to_string(),
                len: n,
                context: self.config.context,
            });
        }
        Ok(n)
    }
}
