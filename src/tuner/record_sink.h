// Where the tuning loop writes what it measured. The loop only appends
// records, one batch per round, so a store (the sqlite RecordDB today, a
// shared server database later) or a test's recorder plugs in here.
#pragma once

#include <vector>

#include "tuner/records.h"

namespace kiln::tuner {

class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // Stores the batch whole or not at all; throws on failure (the loop stops).
  virtual void add_batch(const std::vector<Record>& records) = 0;
};

// Appends to a records database (one transaction per batch).
class RecordDBSink : public RecordSink {
 public:
  explicit RecordDBSink(RecordDB& db) : db_(db) {}
  void add_batch(const std::vector<Record>& records) override { db_.add_batch(records); }

 private:
  RecordDB& db_;
};

}  // namespace kiln::tuner
