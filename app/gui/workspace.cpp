#include "app/gui/workspace.h"

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLockFile>
#include <QSettings>
#include <QStandardPaths>
#include <QUndoCommand>

namespace cs::gui {

namespace {

constexpr int kMaxRecentFiles = 8;
constexpr int kAutosaveSlots = 16;
constexpr const char* kRecentKey = "files/recent";

QString autosaveDir() {
  return QStandardPaths::writableLocation(QStandardPaths::AppDataLocation) + "/autosave";
}
QString slotFile(int slot, const char* suffix) {
  return autosaveDir() + QString("/session-%1%2").arg(slot).arg(suffix);
}

// The note beside a session's autosave file of the file it was saved from.
QString sourceNoteOf(const QString& autosave) {
  return QString(autosave).replace(".clusterscope.json", ".source");
}

// A session's autosave file and its note.
void removeAutosave(const QString& path) {
  if (path.isEmpty()) return;
  QFile::remove(path);
  QFile::remove(sourceNoteOf(path));
}

QString readText(const QString& path) {
  QFile f(path);
  if (!f.open(QIODevice::ReadOnly)) return {};
  return QString::fromUtf8(f.readAll()).trimmed();
}

}  // namespace

// One undoable edit: the project before and after.
class ProjectCommand : public QUndoCommand {
 public:
  ProjectCommand(Workspace* workspace, const QString& text, Project before, Project after,
                 QString merge_key)
      : QUndoCommand(text),
        workspace_(workspace),
        before_(std::move(before)),
        after_(std::move(after)),
        merge_key_(std::move(merge_key)) {}

  void redo() override { workspace_->setProject(after_); }
  void undo() override { workspace_->setProject(before_); }
  int id() const override { return merge_key_.isEmpty() ? -1 : 1; }
  bool mergeWith(const QUndoCommand* other) override {
    const auto* next = static_cast<const ProjectCommand*>(other);
    if (next->merge_key_ != merge_key_) return false;
    after_ = next->after_;
    // Typed back to where the step began ("4" to "41" and back): the stack
    // drops a step that changes nothing, and the project is as saved again.
    setObsolete(same_edits(before_, after_));
    return true;
  }

 private:
  Workspace* workspace_;
  Project before_;
  Project after_;
  QString merge_key_;
};

Workspace::Workspace(QObject* parent) : QObject(parent) {
  // A user's file that does not read leaves the shipped presets, said why
  // (the app had none: empty lists and no project to start with).
  std::string user_error;
  auto loaded = PresetCatalog::load_default_or_shipped(user_error);
  if (loaded) {
    catalog_ = std::move(loaded).value();
    user_presets_error_ = QString::fromStdString(user_error);
  } else {
    presets_error_ = QString::fromStdString(loaded.message());
  }
  connect(&undo_, &QUndoStack::cleanChanged, this, &Workspace::fileChanged);
  autosave_timer_.setSingleShot(true);
  autosave_timer_.setInterval(2000);
  connect(&autosave_timer_, &QTimer::timeout, this, &Workspace::autosaveNow);
  presets_changed_.setSingleShot(true);
  presets_changed_.setInterval(300);
  connect(&presets_changed_, &QTimer::timeout, this, [this] {
    watchUserPresets();  // a file added or replaced (saved by renaming) is watched anew
    // Read again only when a preset file changed: the folder watched may
    // be one where other files come and go (its parent, before it is made).
    const QStringList now = userPresetsFingerprint();
    if (now == presets_fingerprint_) return;
    presets_fingerprint_ = now;
    reloadPresets();
  });
  connect(&presets_watcher_, &QFileSystemWatcher::directoryChanged, &presets_changed_,
          qOverload<>(&QTimer::start));
  connect(&presets_watcher_, &QFileSystemWatcher::fileChanged, &presets_changed_,
          qOverload<>(&QTimer::start));
  watchUserPresets();
  presets_fingerprint_ = userPresetsFingerprint();
  claimAutosaveSlot();
}

QStringList Workspace::userPresetsFingerprint() const {
  QStringList out;
  const std::filesystem::path dir = user_presets_dir();
  if (dir.empty()) return out;
  for (const QFileInfo& f :
       QDir(QString::fromStdString(dir.string()))
           .entryInfoList({QStringLiteral("*.json")}, QDir::Files, QDir::Name)) {
    out << f.fileName() + QLatin1Char('|') + QString::number(f.size()) + QLatin1Char('|') +
               QString::number(f.lastModified().toMSecsSinceEpoch()) + QLatin1Char('|') +
               QString::number(f.metadataChangeTime().toMSecsSinceEpoch());
  }
  return out;
}

void Workspace::watchUserPresets() {
  const std::filesystem::path dir = user_presets_dir();
  if (dir.empty()) return;
  if (!presets_watcher_.files().isEmpty()) presets_watcher_.removePaths(presets_watcher_.files());
  if (!presets_watcher_.directories().isEmpty())
    presets_watcher_.removePaths(presets_watcher_.directories());
  const QString folder = QString::fromStdString(dir.string());
  if (QFileInfo(folder).isDir()) {
    presets_watcher_.addPath(folder);
    QStringList files;
    for (const QFileInfo& f : QDir(folder).entryInfoList({QStringLiteral("*.json")}, QDir::Files))
      files << f.absoluteFilePath();
    if (!files.isEmpty()) presets_watcher_.addPaths(files);
  } else {
    // Not made yet (a first calibration makes it): its parent, if there.
    const QString parent = QFileInfo(folder).absolutePath();
    if (QFileInfo(parent).isDir()) presets_watcher_.addPath(parent);
  }
}

bool Workspace::reloadPresets() {
  auto loaded = PresetCatalog::load_default();
  if (!loaded) {
    emit message(tr("The presets could not be read again; those loaded before stay.\n%1")
                     .arg(QString::fromStdString(loaded.message())),
                 MessageLevel::error);
    return false;
  }
  catalog_ = std::move(loaded).value();
  presets_fingerprint_ = userPresetsFingerprint();
  presets_error_.clear();
  user_presets_error_.clear();  // the user's files read, this time
  emit presetsChanged();
  return true;
}

Workspace::~Workspace() {
  // The undo stack comes clean as it is destroyed, after this body: its
  // cleanChanged said fileChanged to receivers already destroyed (the main
  // window, whose child this is, is past its own destructor by then; UBSan
  // saw refreshTitle called on what was only a QWidget any more).
  disconnect(&undo_, nullptr, this, nullptr);
}

void Workspace::claimAutosaveSlot() {
  if (!QDir().mkpath(autosaveDir())) return;
  // A slot whose file survived while nobody holds its lock belongs to a
  // session that crashed: the first such is offered for recovery.
  for (int slot = 0; slot < kAutosaveSlots && !recovery_lock_; ++slot) {
    if (!QFileInfo::exists(slotFile(slot, ".clusterscope.json"))) continue;
    auto lock = std::make_unique<QLockFile>(slotFile(slot, ".lock"));
    lock->setStaleLockTime(0);  // stale only when its process is gone, never by age
    if (lock->tryLock(0)) {
      recovery_lock_ = std::move(lock);
      recovery_path_ = slotFile(slot, ".clusterscope.json");
      recovery_source_ = readText(slotFile(slot, ".source"));
    }
  }
  for (int slot = 0; slot < kAutosaveSlots; ++slot) {
    const QString file = slotFile(slot, ".clusterscope.json");
    if (file == recovery_path_ || QFileInfo::exists(file)) continue;
    auto lock = std::make_unique<QLockFile>(slotFile(slot, ".lock"));
    lock->setStaleLockTime(0);
    if (lock->tryLock(0)) {
      session_lock_ = std::move(lock);
      autosave_path_ = file;
      return;
    }
  }
}

QString Workspace::displayName() const {
  return path_.isEmpty() ? tr("Untitled") : QFileInfo(path_).fileName();
}

void Workspace::edit(const QString& text, Project after, const QString& merge_key) {
  // A list's item picked again, the explorer's row that is the plan already:
  // no step that changes nothing, and no change to save.
  if (same_edits(project_, after)) return;
  undo_.push(new ProjectCommand(this, text, project_, std::move(after), merge_key));
}

void Workspace::setProject(Project project) {
  project.runs = std::move(project_.runs);
  project.pinned = std::move(project_.pinned);
  project_ = std::move(project);
  emit projectChanged();
  scheduleAutosave();
}

void Workspace::recordRun(ProjectRun run) {
  const bool was_modified = isModified();
  project_.runs.push_back(std::move(run));
  records_unsaved_ = true;
  if (!was_modified) emit fileChanged();
  emit projectChanged();
  scheduleAutosave();
}

void Workspace::setPinned(std::vector<ProjectPin> pinned) {
  if (same_pins(project_.pinned, pinned)) return;
  const bool was_modified = isModified();
  project_.pinned = std::move(pinned);
  records_unsaved_ = true;
  if (!was_modified) emit fileChanged();
  scheduleAutosave();
}

void Workspace::selectPlan(int index) {
  if (index < 0 || index >= int(project_.plans.size()) || index == project_.current_plan) return;
  project_.current_plan = index;
  emit projectChanged();
}

void Workspace::replaceAll(Project project, const QString& path, bool modified) {
  // The last project's unsaved changes were saved or discarded: after New
  // with Discard they stayed in the autosave, and a crash before the next
  // edit offered them back.
  autosave_timer_.stop();
  removeAutosave(autosave_path_);
  undo_.clear();
  project_ = std::move(project);
  records_unsaved_ = false;
  path_ = path;
  if (modified) {
    undo_.resetClean();  // no step is clean: the project differs from its file
  } else {
    undo_.setClean();
  }
  emit projectReplaced();
  emit projectChanged();
  emit fileChanged();
}

bool Workspace::newProject() {
  if (!presets_error_.isEmpty()) {
    emit message(tr("No default project: the presets could not be loaded.\n%1").arg(presets_error_),
                 MessageLevel::error);
    replaceAll(Project{}, {}, false);
    return false;
  }
  auto project = default_project(catalog_);
  if (!project) {
    emit message(QString::fromStdString(project.message()), MessageLevel::error);
    replaceAll(Project{}, {}, false);
    return false;
  }
  replaceAll(std::move(project).value(), {}, false);
  return true;
}

bool Workspace::open(const QString& path) {
  auto project = load_project(path.toStdString());
  if (!project) {
    QString why = QString::fromStdString(project.message());
    // A recent file that is gone (moved, deleted) leaves the list: it stayed,
    // failing each time. One that exists but does not read stays, to be mended.
    if (!QFileInfo::exists(path) && recentFiles().contains(path)) {
      removeRecentFile(path);
      why += tr("\nIt is no longer in the recent files.");
    }
    emit message(tr("Could not open %1:\n%2").arg(QFileInfo(path).fileName(), why),
                 MessageLevel::error);
    return false;
  }
  replaceAll(std::move(project).value(), QFileInfo(path).absoluteFilePath(), false);
  addRecentFile(path_);
  emit message(tr("Opened %1").arg(displayName()), MessageLevel::info);
  return true;
}

bool Workspace::save() {
  if (path_.isEmpty()) return false;
  return saveAs(path_);
}

bool Workspace::saveAs(const QString& path) {
  QString target = path;
  if (!target.endsWith(QString::fromUtf8(kProjectSuffix.data(), int(kProjectSuffix.size()))) &&
      QFileInfo(target).suffix().isEmpty()) {
    target += QString::fromUtf8(kProjectSuffix.data(), int(kProjectSuffix.size()));
  }
  // A read-only file is refused by name and kept (core/file_beside.h).
  const Status saved = save_project(target.toStdString(), project_);
  if (!saved) {
    emit message(tr("Could not save: %1").arg(QString::fromStdString(saved.message())),
                 MessageLevel::error);
    return false;
  }
  path_ = QFileInfo(target).absoluteFilePath();
  undo_.setClean();
  records_unsaved_ = false;
  addRecentFile(path_);
  autosave_timer_.stop();
  removeAutosave(autosave_path_);
  emit fileChanged();
  emit message(tr("Saved %1").arg(displayName()), MessageLevel::info);
  return true;
}

QStringList Workspace::recentFiles() const {
  return QSettings().value(kRecentKey).toStringList();
}

void Workspace::clearRecentFiles() {
  QSettings().remove(kRecentKey);
  emit recentFilesChanged();
}

void Workspace::removeRecentFile(const QString& path) {
  QStringList files = recentFiles();
  files.removeAll(path);
  QSettings().setValue(kRecentKey, files);
  emit recentFilesChanged();
}

void Workspace::addRecentFile(const QString& path) {
  QStringList files = recentFiles();
  files.removeAll(path);
  files.prepend(path);
  while (files.size() > kMaxRecentFiles)
    files.removeLast();
  QSettings().setValue(kRecentKey, files);
  emit recentFilesChanged();
}

void Workspace::setAutosaveDelay(int milliseconds) {
  autosave_timer_.setInterval(milliseconds);
}

void Workspace::scheduleAutosave() {
  if (!autosave_path_.isEmpty()) autosave_timer_.start();
}

void Workspace::autosaveNow() {
  autosave_timer_.stop();
  if (autosave_path_.isEmpty()) return;
  if (!isModified()) {
    QFile::remove(autosave_path_);
    return;
  }
  const Status saved = save_project(autosave_path_.toStdString(), project_);
  if (!saved) {
    emit message(tr("Autosave failed: %1").arg(QString::fromStdString(saved.message())),
                 MessageLevel::warning);
    return;
  }
  QFile source(sourceNoteOf(autosave_path_));
  if (source.open(QIODevice::WriteOnly | QIODevice::Truncate)) source.write(path_.toUtf8());
}

bool Workspace::recover() {
  if (recovery_path_.isEmpty()) return false;
  auto project = load_project(recovery_path_.toStdString());
  if (!project) {
    // Kept, not deleted: it is the last session's unsaved work (written by
    // a newer ClusterScope, say), which another version may still read.
    emit message(tr("The recovered project could not be read:\n%1\nIt is kept in %2.")
                     .arg(QString::fromStdString(project.message()), recovery_path_),
                 MessageLevel::error);
    recovery_lock_.reset();
    recovery_path_.clear();
    recovery_source_.clear();
    emit recoveryChanged();
    return false;
  }
  replaceAll(std::move(project).value(), recovery_source_, true);
  discardRecovery();
  autosaveNow();  // the recovered changes are now this session's to keep safe
  emit message(tr("Recovered the unsaved changes of the last session."), MessageLevel::info);
  return true;
}

void Workspace::discardRecovery() {
  if (recovery_path_.isEmpty()) return;
  removeAutosave(recovery_path_);
  recovery_lock_.reset();
  recovery_path_.clear();
  recovery_source_.clear();
  emit recoveryChanged();
}

void Workspace::closeSession() {
  autosave_timer_.stop();
  removeAutosave(autosave_path_);
}

}  // namespace cs::gui
