#include "session/snapshot_store.h"

#include <algorithm>

namespace heapscope {

void SnapshotStore::save(HeapSnapshot snapshot) {
  auto saved = std::make_shared<const HeapSnapshot>(std::move(snapshot));
  std::lock_guard lock(mutex_);
  std::erase_if(snapshots_, [&](const Ptr& p) { return p->name == saved->name; });
  snapshots_.push_back(std::move(saved));
}

SnapshotStore::Ptr SnapshotStore::find(const std::string& name) const {
  std::lock_guard lock(mutex_);
  for (const Ptr& p : snapshots_)
    if (p->name == name) return p;
  return nullptr;
}

bool SnapshotStore::drop(const std::string& name) {
  std::lock_guard lock(mutex_);
  return std::erase_if(snapshots_, [&](const Ptr& p) { return p->name == name; }) > 0;
}

std::vector<SnapshotStore::Ptr> SnapshotStore::all() const {
  std::lock_guard lock(mutex_);
  return snapshots_;
}

void add_snapshot_warnings(const HeapSnapshot& snapshot, const std::vector<std::string>& current,
                           std::vector<std::string>& out) {
  for (const std::string& w : snapshot.warnings)
    if (std::find(current.begin(), current.end(), w) == current.end()) out.push_back(snapshot.name + ": " + w);
}

std::shared_ptr<SnapshotStore> SnapshotRegistry::store_for(const std::string& target_key) {
  std::lock_guard lock(mutex_);
  std::shared_ptr<SnapshotStore>& store = stores_[target_key];
  if (!store) store = std::make_shared<SnapshotStore>();
  return store;
}

}  // namespace heapscope
