// Lesson: training a small transformer, built from the library's pieces the way a PyTorch
// user builds one: Modules for the layers, scaled_dot_product_attention for attention,
// cross_entropy with ignore_index for the loss, AdamW with warmup, a cosine decay and gradient
// clipping for the optimization.
//
// The task: reverse a sequence of digits. An example is
//
//     3 1 4 1 5 9 2 6 | 6 2 9 5 1 4 1 3        ('|' is a separator token, SEP)
//
// and the model reads it left to right, predicting each next token from the ones before it
// (a "decoder-only" language model, GPT's shape). Only the answer is learnable: the prompt's
// digits are random, so no model can predict them, and a loss that counted them would be
// mostly noise the model is asked to fit. The answer is fully determined by the prompt, so
// a trained model gets it exactly right, and the program checks that it does.
//
// The model, bottom to top:
//   - token and position embeddings (nn::Embedding), added. Attention by itself sees a set,
//     not a sequence: without the position's vector, "the 3rd digit" and "the 6th digit"
//     would look the same, and reversing is nothing but positions.
//   - N transformer blocks. Each is two sub-layers, each added to its input (a residual
//     connection: the block learns a correction to x, and the gradient has a direct path
//     from the loss to every layer):
//         x = x + attention(layer_norm1(x))   tokens exchange information
//         x = x + mlp(layer_norm2(x))         each token computes on what it gathered
//     This is the pre-LayerNorm form (GPT-2 and most models since): the normalization is
//     on the branch, so the residual path x -> x + ... -> x + ... is an identity all the
//     way down. With the original post-LayerNorm form, LayerNorm(x + attention(x)), every
//     block rescales that path, and training is stable only with a long, careful warmup.
//   - a final LayerNorm (the residual stream is never normalized inside the blocks) and a
//     Linear head giving one score (logit) per vocabulary token at every position.
//
// Attention: one Linear projects x to queries, keys and values for all heads at once; a
// reshape and a permute turn [B, S, 3, H, D] into three [B, H, S, D] views (no copies:
// scaled_dot_product_attention takes any strides with a contiguous last dim); each head
// mixes the values of the positions whose keys match its query; the heads are put side by
// side again and an output Linear mixes them.
//
// Causal masking (is_causal): the model is trained to predict token t + 1 at position t, for
// every t of the sequence at once, in one forward pass. That is honest only if position t
// cannot see tokens after t; otherwise it would read the answer instead of computing it, and
// have learnt nothing it can use when generating, where the later tokens do not exist yet.
// is_causal masks key j > query i inside the attention op, without building a mask tensor.
//
// ignore_index: the targets are the inputs shifted by one, with every target before the
// answer set to ignore_index. cross_entropy skips those rows: they add no loss and no
// gradient, and the mean divides by the number of answer rows only. This is also how
// padding is usually left out of a language model's loss.
//
// The test is greedy decoding on held-out examples: give the model the prompt and SEP, take
// its most likely token, append it, run it again, 8 times; an example counts only if all 8
// digits are right (exact match). This is harder than the per-position accuracy the
// training log shows, which is "teacher-forced": each position is given the true tokens
// before it, so one early mistake does not spoil the rest as it does when generating.
//
//   train_transformer [--device cpu|cuda]     default: the GPU when one is present, else the CPU
//
// Exits non-zero if the exact-match accuracy is below 90%, or if a position's logits change
// when later tokens do (the causal mask, checked directly at the end).
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include <fmt/core.h>

#include <minigrad/minigrad.h>

#include "samples/device.h"

using namespace minigrad;
using minigrad::samples::choose_device;

namespace {

// The vocabulary: the digits 0-9 are their own token ids; SEP is 10.
constexpr int64_t kDigits = 10;
constexpr int64_t kSep = 10;
constexpr int64_t kVocab = 11;
constexpr int64_t kIgnore = -100;  // cross_entropy's default ignore_index, as PyTorch's

struct Config {
  int64_t length = 8;    // digits to reverse: a full sequence is 2 * length + 1 tokens
  int64_t d_model = 64;  // the width of the residual stream
  int64_t heads = 4;     // d_model / heads = 16 numbers per head's query, key and value
  int64_t layers = 2;
  int64_t mlp_hidden = 256;  // the feed-forward block's width, 4 * d_model as in GPT
  // Dropout off: every batch is freshly drawn, so the model never sees an example twice and
  // has nothing to overfit; dropout would only slow it down. The wiring is here because real
  // models use it, and train() / eval() switch it.
  double dropout = 0.0;
  // The model's inputs are the sequence without its last token: positions 0 .. 2 * length - 1.
  int64_t context() const { return 2 * length; }
};

// One batch: inputs [B, 2L] and targets [B, 2L], the same sequence shifted by one, with the
// targets that are not answer digits set to kIgnore.
struct Batch {
  Tensor inputs, targets;
};

// `count` random examples. The sequence is digits, SEP, the digits reversed (flip): written
// with tensor ops, as a PyTorch user writes it, so it works on either device.
Batch make_batch(int64_t count, const Config& cfg, Device device) {
  const TensorOptions opts = TensorOptions(kInt64).device(device);
  const Tensor digits = randint(0, kDigits, {count, cfg.length}, opts);
  const Tensor sep = full({count, 1}, static_cast<double>(kSep), opts);
  const Tensor sequence = cat({digits, sep, digits.flip({1})}, 1);  // [B, 2L + 1]
  const int64_t n = sequence.size(1);
  const Tensor inputs = sequence.narrow(1, 0, n - 1);
  // Target t is token t + 1. Targets 0 .. L - 1 are the prompt's digits 2 .. L and SEP: the
  // first are random, SEP always comes at the same place; neither is what we teach. Targets
  // L .. 2L - 1 are the answer, the reversed digits.
  const Tensor prompt = arange(n - 1, opts) < static_cast<double>(cfg.length);  // [2L] bool
  const Tensor targets = sequence.narrow(1, 1, n - 1).masked_fill(prompt, static_cast<double>(kIgnore));
  return {inputs, targets};
}

// Multi-head causal self-attention: x [B, S, d_model] -> [B, S, d_model].
class CausalSelfAttention : public nn::Module {
 public:
  explicit CausalSelfAttention(const Config& cfg)
      : heads(cfg.heads),
        dropout_p(cfg.dropout),
        qkv(register_module("qkv", std::make_shared<nn::Linear>(cfg.d_model, 3 * cfg.d_model))),
        proj(register_module("proj", std::make_shared<nn::Linear>(cfg.d_model, cfg.d_model))) {}

  Tensor forward(const Tensor& x) override {
    const int64_t B = x.size(0), S = x.size(1), d_model = x.size(2);
    // [B, S, 3 * d_model] -> [B, S, 3, H, D] -> [3, B, H, S, D]: views of one tensor.
    const Tensor qkv_heads = qkv->forward(x).view({B, S, 3, heads, d_model / heads}).permute({2, 0, 3, 1, 4});
    const Tensor q = qkv_heads.select(0, 0), k = qkv_heads.select(0, 1), v = qkv_heads.select(0, 2);
    // Dropout on the attention probabilities in training only, as nn::Dropout does.
    const Tensor y = scaled_dot_product_attention(q, k, v, std::nullopt, is_training() ? dropout_p : 0.0,
                                                  /*is_causal=*/true);
    // [B, H, S, D] -> [B, S, H, D] -> [B, S, d_model]: the heads side by side again (the
    // transpose is a view; reshape copies it into that order).
    return proj->forward(y.transpose(1, 2).reshape({B, S, d_model}));
  }
  std::string name() const override { return "CausalSelfAttention"; }

  int64_t heads;
  double dropout_p;
  std::shared_ptr<nn::Linear> qkv, proj;
};

// The pre-LayerNorm block: x + attention(ln1(x)), then that + mlp(ln2(that)).
class Block : public nn::Module {
 public:
  explicit Block(const Config& cfg)
      : ln1(register_module("ln1", std::make_shared<nn::LayerNorm>(Shape{cfg.d_model}))),
        attn(register_module("attn", std::make_shared<CausalSelfAttention>(cfg))),
        ln2(register_module("ln2", std::make_shared<nn::LayerNorm>(Shape{cfg.d_model}))),
        mlp(register_module("mlp", std::make_shared<nn::MLP>(cfg.d_model, cfg.mlp_hidden))),
        drop(register_module("drop", std::make_shared<nn::Dropout>(cfg.dropout))) {}

  Tensor forward(const Tensor& x) override {
    const Tensor h = x + drop->forward(attn->forward(ln1->forward(x)));
    return h + drop->forward(mlp->forward(ln2->forward(h)));
  }
  std::string name() const override { return "Block"; }

  std::shared_ptr<nn::LayerNorm> ln1;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<nn::LayerNorm> ln2;
  std::shared_ptr<nn::MLP> mlp;
  std::shared_ptr<nn::Dropout> drop;
};

// tokens [B, S] int64 -> logits [B, S, vocab].
class Transformer : public nn::Module {
 public:
  // Children registered bottom to top, so that named_parameters() lists the model in that
  // order: "token_embedding.weight", ..., "blocks.0.ln1.weight", ..., "head.bias".
  explicit Transformer(const Config& cfg)
      : token_embedding(register_module("token_embedding", std::make_shared<nn::Embedding>(kVocab, cfg.d_model))),
        position_embedding(
            register_module("position_embedding", std::make_shared<nn::Embedding>(cfg.context(), cfg.d_model))),
        blocks(register_module("blocks", make_blocks(cfg))),
        ln_f(register_module("ln_f", std::make_shared<nn::LayerNorm>(Shape{cfg.d_model}))),
        head(register_module("head", std::make_shared<nn::Linear>(cfg.d_model, kVocab))) {}

  Tensor forward(const Tensor& tokens) override {
    const int64_t S = tokens.size(1);
    const Tensor positions = arange(S, TensorOptions(kInt64).device(tokens.device()));  // [S]
    // [B, S, d] + [S, d]: the position vectors broadcast over the batch.
    const Tensor x = token_embedding->forward(tokens) + position_embedding->forward(positions);
    return head->forward(ln_f->forward(blocks->forward(x)));
  }
  std::string name() const override { return "Transformer"; }

  static std::shared_ptr<nn::Sequential> make_blocks(const Config& cfg) {
    auto blocks = std::make_shared<nn::Sequential>();
    for (int64_t i = 0; i < cfg.layers; ++i) blocks->push_back(std::make_shared<Block>(cfg));
    return blocks;
  }

  std::shared_ptr<nn::Embedding> token_embedding, position_embedding;
  std::shared_ptr<nn::Sequential> blocks;
  std::shared_ptr<nn::LayerNorm> ln_f;
  std::shared_ptr<nn::Linear> head;
};

// Cross-entropy over the answer positions: logits [B, S, V] and targets [B, S] flattened to
// the [N, V] and [N] cross_entropy takes; the kIgnore rows count for nothing.
Tensor loss_fn(const Tensor& logits, const Tensor& targets) {
  return cross_entropy(logits.reshape({-1, kVocab}), targets.reshape({-1}), kIgnore);
}

// Teacher-forced accuracy of the answer tokens: the fraction of non-ignored positions whose
// argmax is the target. Cheap (the logits are already there), so the training log uses it.
double answer_token_accuracy(const Tensor& logits, const Tensor& targets) {
  NoGradGuard no_grad;
  const Tensor counted = targets != static_cast<double>(kIgnore);
  const Tensor right = logical_and(argmax(logits, -1) == targets, counted);
  return right.to(kFloat64).sum().item<double>() / counted.to(kFloat64).sum().item<double>();
}

// Greedy decoding: the prompt and SEP, then L times: run the model, append the argmax at
// the last position. No key/value cache (each step recomputes the whole prefix): simple,
// and at 17 tokens cheap. Returns the fraction of examples whose every answer digit is
// right, and the fraction of answer digits that are right.
struct Scores {
  double exact_match, digits;
};
Scores greedy_decode_accuracy(Transformer& model, const Batch& test, const Config& cfg) {
  NoGradGuard no_grad;  // no tape: nothing here is differentiated
  Tensor sequence = test.inputs.narrow(1, 0, cfg.length + 1);  // the digits and SEP
  for (int64_t i = 0; i < cfg.length; ++i) {
    const Tensor logits = model.forward(sequence);                              // [N, S, V]
    const Tensor next = argmax(logits.select(1, sequence.size(1) - 1), -1);     // [N]
    sequence = cat({sequence, next.unsqueeze(1)}, 1);
  }
  const Tensor answer = sequence.narrow(1, cfg.length + 1, cfg.length);
  const Tensor expected = test.targets.narrow(1, cfg.length, cfg.length);
  const Tensor right = answer == expected;  // [N, L] bool
  return {all(right, 1).to(kFloat64).mean().item<double>(), right.to(kFloat64).mean().item<double>()};
}

// What is_causal promises, checked: the logits at positions before `cut` do not depend on
// the tokens from `cut` on. Replace those tokens with SEP (never an answer digit) and run
// again: the earlier positions' logits must stay as they were, the later ones must change.
bool causal_mask_holds(Transformer& model, const Tensor& tokens, int64_t cut) {
  NoGradGuard no_grad;
  const int64_t B = tokens.size(0), S = tokens.size(1);
  const Tensor seps = full({B, S - cut}, static_cast<double>(kSep), TensorOptions(kInt64).device(tokens.device()));
  const Tensor changed = cat({tokens.narrow(1, 0, cut), seps}, 1);
  const Tensor before = model.forward(tokens), after = model.forward(changed);
  const bool past_unchanged = before.narrow(1, 0, cut).allclose(after.narrow(1, 0, cut), 1e-5, 1e-5);
  const bool future_changed = !before.narrow(1, cut, S - cut).allclose(after.narrow(1, cut, S - cut), 1e-5, 1e-5);
  fmt::print("causal mask: tokens {}..{} replaced; logits at positions 0..{} unchanged: {}; at {}..{} changed: {}\n",
             cut, S - 1, cut - 1, past_unchanged ? "yes" : "NO", cut, S - 1, future_changed ? "yes" : "no");
  return past_unchanged && future_changed;
}

}  // namespace

int main(int argc, char** argv) {
  const Device device = choose_device(argc, argv);
  manual_seed(0);
  const Config cfg;

  // The held-out set, drawn first. Training draws fresh examples every step, 64 * 300 of the
  // 10^8 possible prompts: on average 0.2 of the 1000 test prompts is also seen in training,
  // so the score measures what the model learnt, not what it remembers.
  const Batch test = make_batch(1000, cfg, device);

  Transformer model(cfg);
  model.to(device);
  const int64_t batch_size = 64;
  const int64_t steps = 300;
  const int64_t log_every = 25;
  // AdamW with a peak learning rate of 3e-3, high for large models, right for one this small;
  // beta2 0.99 rather than 0.999, so the squared-gradient average follows a loss that falls
  // fast. Weight decay 0.01 on the matrices (the embeddings and the Linear weights) and none
  // on the vectors (biases, LayerNorm's weights): decay pulls a weight toward 0, right for a
  // matrix, but a LayerNorm weight's natural value is 1 and a bias's whatever the data needs.
  // Two parameter groups say so, as in GPT-2's training code.
  // The learning rate warms up over 30 steps (Adam's first updates, from moment estimates of
  // a few gradients, are noisy: small steps until they settle), then follows a half cosine
  // down to a tenth of its peak, so the last steps fine-tune.
  optim::ParamGroup matrices, vectors{{}, /*weight_decay=*/0.0};
  for (const Tensor& p : model.parameters()) (p.dim() >= 2 ? matrices : vectors).params.push_back(p);
  optim::AdamW optimizer({matrices, vectors}, optim::AdamWOptions{/*lr=*/3e-3, 0.9, 0.99, 1e-8, /*weight_decay=*/0.01});
  const optim::CosineSchedule schedule{/*base_lr=*/3e-3, /*warmup_steps=*/30, /*total_steps=*/steps,
                                       /*min_lr=*/3e-4};
  // Gradient clipping at a total norm of 1 (GPT's setting): a rare batch with a huge
  // gradient (early on, or when attention suddenly sharpens) would otherwise throw the
  // weights far off in one step. On this small, tame problem it never fires (the line after
  // training says how often it did); in larger models it does, and it costs one reduction.
  const double max_grad_norm = 1.0;

  fmt::print("reversing {} digits: a decoder-only transformer, d_model {}, {} heads, {} layers, {} parameters; "
             "float32 on {}\n",
             cfg.length, cfg.d_model, cfg.heads, cfg.layers, model.num_parameters(), device);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  int64_t clipped_steps = 0;
  double largest_grad_norm = 0.0;
  model.train();
  for (int64_t step = 0; step < steps; ++step) {
    const Batch batch = make_batch(batch_size, cfg, device);
    optimizer.set_lr(schedule.lr(step));
    optimizer.zero_grad();  // backward adds into .grad: each step starts from none
    const Tensor logits = model.forward(batch.inputs);
    const Tensor loss = loss_fn(logits, batch.targets);
    loss.backward();
    const double grad_norm = optim::clip_grad_norm_(model.parameters(), max_grad_norm);
    optimizer.step();
    if (grad_norm > max_grad_norm) ++clipped_steps;
    largest_grad_norm = std::max(largest_grad_norm, grad_norm);
    if (step == 0 || (step + 1) % log_every == 0)
      fmt::print("step {:5d}/{}  loss {:.4f}  answer tokens {:5.1f}%  grad norm {:6.3f}  lr {:.2e}  elapsed {:.2f}s\n",
                 step + 1, steps, loss.item<double>(), 100.0 * answer_token_accuracy(logits, batch.targets), grad_norm,
                 optimizer.lr(), elapsed_s());
  }

  fmt::print("gradient norm: largest {:.3f}; clipped to {:.1f} in {} of {} steps\n", largest_grad_norm, max_grad_norm,
             clipped_steps, steps);
  model.eval();  // dropout off (a no-op here, but the habit matters)
  const Scores scores = greedy_decode_accuracy(model, test, cfg);
  fmt::print("held-out, greedy decoding: {:.1f}% of {} sequences exactly right, {:.2f}% of digits right; "
             "{} steps in {:.2f}s\n",
             100.0 * scores.exact_match, test.inputs.size(0), 100.0 * scores.digits, steps, elapsed_s());
  bool ok = true;
  if (scores.exact_match < 0.90) {
    fmt::print("FAILED: exact-match accuracy below 90%\n");
    ok = false;
  }
  // Answer digits from position length + 2 on; SEP never appears there.
  if (!causal_mask_holds(model, test.inputs.narrow(0, 0, 16), cfg.length + 2)) {
    fmt::print("FAILED: a position's logits depend on later tokens\n");
    ok = false;
  }
  return ok ? 0 : 1;
}
