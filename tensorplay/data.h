// The data namespace: token shards, window loaders and the SentencePiece tokenizer.
// Include this from user code; library code includes the headers it needs.
#pragma once

#include "tensorplay/data/byte_level_bpe_tokenizer.h"
#include "tensorplay/data/nfc.h"
#include "tensorplay/data/sentencepiece_tokenizer.h"
#include "tensorplay/data/token_shards.h"
#include "tensorplay/data/token_window_loader.h"
#include "tensorplay/data/tokenizer.h"
