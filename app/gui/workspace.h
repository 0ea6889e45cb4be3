#pragma once
// The open project and everything around it: the preset catalog, undo/redo
// of every edit (whole-project snapshots: a project is a few kilobytes; the
// runs recorded stay out of them), the
// project file (new, open, save, save as), recent files, and autosave with
// crash recovery. Views read project() and change it only through edit().

#include <QFileSystemWatcher>
#include <QObject>
#include <QString>
#include <QStringList>
#include <QTimer>
#include <QUndoStack>
#include <memory>

#include "app/gui/message_level.h"
#include "app/gui/project.h"
#include "core/presets.h"

class QLockFile;

namespace cs::gui {

class Workspace : public QObject {
  Q_OBJECT

 public:
  // Loads the presets (a failure is reported by message() once the window
  // listens, see presetsError()). Starts with an empty project: call
  // newProject() or open().
  explicit Workspace(QObject* parent = nullptr);
  ~Workspace() override;

  const PresetCatalog& catalog() const { return catalog_; }
  // Why the presets could not be loaded; empty when they were.
  const QString& presetsError() const { return presets_error_; }
  // Reads the presets again (a calibration saved new ones), then
  // presetsChanged. Where they no longer read, those loaded stay, and
  // message() says why; false.
  bool reloadPresets();
  // Why the user's own presets were left out (a file of theirs that does
  // not read), the shipped ones loaded without them; empty when they were not.
  const QString& userPresetsError() const { return user_presets_error_; }
  const Project& project() const { return project_; }
  QUndoStack* undoStack() { return &undo_; }

  // Replaces the project with `after` as one undoable step named `text`.
  // Consecutive edits with the same non-empty `merge_key` merge into one
  // step (typing in a field is one undo step per field, not per key).
  void edit(const QString& text, Project after, const QString& merge_key = {});

  // Records a finished run in the project's history. Not an undo step: undo
  // and redo restore plans, clusters and workloads and keep every run
  // recorded (a run is a fact, not an edit). The project is modified until
  // it is saved.
  void recordRun(ProjectRun run);
  // Replaces the plans pinned to compare. As a run recorded, not an undo
  // step (undo and redo keep them), but saved with the project: it is
  // modified until saved. Pins the same as before change nothing.
  void setPinned(std::vector<ProjectPin> pinned);
  // Shows another plan: not an edit (no undo step, not a change to save),
  // as a tab is not; undoing an edit of another plan shows that plan again.
  void selectPlan(int index);

  QString filePath() const { return path_; }
  QString displayName() const;  // file name, or "Untitled"
  bool isModified() const { return !undo_.isClean() || records_unsaved_; }

  // Each returns false, with a message(), when it fails; the open project is
  // then left as it was.
  bool newProject();  // the default project (DGX H100 pod, LLaMA-2 7B)
  bool open(const QString& path);
  bool save();  // false when the project has no file yet (use saveAs)
  bool saveAs(const QString& path);

  QStringList recentFiles() const;
  void clearRecentFiles();

  // Autosave: the project is written to a per-session file a moment after
  // every change, and the file is removed on save and on a clean exit. A
  // session that crashed leaves its file behind: the next start offers it.
  void setAutosaveDelay(int milliseconds);
  QString autosavePath() const { return autosave_path_; }
  bool hasRecovery() const { return !recovery_path_.isEmpty(); }
  QString recoverySource() const { return recovery_source_; }  // the file it was saved from, or ""
  bool recover();          // loads the recovered project (modified, with its original path)
  void discardRecovery();  // deletes the crashed session's file
  void autosaveNow();
  // A clean exit: the autosave file is removed.
  void closeSession();

 signals:
  void projectChanged();  // after every edit, undo, redo, new, open and recovery
  // reloadPresets read them again (a calibration in the app, or a file of the
  // user's presets folder changed from outside it)
  void presetsChanged();
  // Before projectChanged, for a new, opened or recovered project: the
  // pinned plans are the new project's (project().pinned).
  void projectReplaced();
  void fileChanged();     // the path or the modified state changed
  void recentFilesChanged();
  void message(const QString& text, cs::gui::MessageLevel level);
  void recoveryChanged();

 private:
  friend class ProjectCommand;
  void setProject(Project project);  // no undo step; the runs recorded and pins are kept
  void replaceAll(Project project, const QString& path, bool modified);
  void addRecentFile(const QString& path);
  void removeRecentFile(const QString& path);
  void scheduleAutosave();
  void claimAutosaveSlot();
  // Watches the user's presets folder (or the folder it is to be made in)
  // and its files: a preset saved from outside the app (clusterscope
  // calibrate, an editor) is read again, as the app's own calibrations are.
  void watchUserPresets();
  // The user's preset files as they stand (names, sizes, times).
  QStringList userPresetsFingerprint() const;

  PresetCatalog catalog_;
  QString presets_error_;
  QString user_presets_error_;
  Project project_;
  QUndoStack undo_;
  // A run recorded or the pins changed since the project was saved or opened.
  bool records_unsaved_ = false;
  QString path_;
  QTimer autosave_timer_;
  QFileSystemWatcher presets_watcher_;
  QTimer presets_changed_;           // a moment after the last change: a save is several
  QStringList presets_fingerprint_;  // as last read
  std::unique_ptr<QLockFile> session_lock_;
  QString autosave_path_;
  QString recovery_path_;
  QString recovery_source_;
  std::unique_ptr<QLockFile> recovery_lock_;
};

}  // namespace cs::gui
