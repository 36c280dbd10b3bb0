"""Lightning's LSTM and transformer demos on token data made here (they download WikiText-2)."""

from __future__ import annotations

import torch
from lightning.pytorch.demos.lstm import LightningLSTM, SequenceSampler, SimpleLSTM
from lightning.pytorch.demos.transformer import LightningTransformer
from torch.utils.data import DataLoader, Dataset

VOCAB = 40


class TokenBlocks(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Blocks of a repeating token sequence, and the same blocks shifted by one (the targets)."""

    def __init__(self, blocks: int = 24, block_size: int = 12) -> None:
        tokens = torch.arange(blocks * block_size + 1) % VOCAB
        self.tokens, self.block_size, self.blocks = tokens, block_size, blocks

    def __len__(self) -> int:
        return self.blocks

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = index * self.block_size
        chunk = self.tokens[start : start + self.block_size + 1]
        return chunk[:-1], chunk[1:]


class TinyLSTM(LightningLSTM):
    """The LSTM demo (its training_step, hidden-state handling and SGD lr=20) at a small size."""

    def __init__(self, vocab_size: int = VOCAB) -> None:
        super().__init__(vocab_size=vocab_size)
        self.model = SimpleLSTM(vocab_size=vocab_size, ninp=16, nhid=16, nlayers=2, dropout=0.0)

    def prepare_data(self) -> None:
        return None

    def train_dataloader(self) -> DataLoader:
        # As the demo's: a batch sampler of 4 interleaved sequences, no batch_size on the loader.
        dataset = TokenBlocks()
        return DataLoader(dataset, batch_sampler=SequenceSampler(dataset, batch_size=4))


class TinyTransformer(LightningTransformer):
    """The transformer demo (returns its loss, logs nothing, SGD lr=0.1) on the blocks above."""

    def __init__(self, vocab_size: int = VOCAB) -> None:
        super().__init__(vocab_size=vocab_size)

    def prepare_data(self) -> None:
        return None

    def train_dataloader(self) -> DataLoader:
        # As the demo's: DataLoader(dataset), one sequence per batch.
        return DataLoader(TokenBlocks(blocks=8))
